"""`python -m harnessrl.app ...`: the same as the `harnessrl` console script."""

from harnessrl.app.main import main

main()
