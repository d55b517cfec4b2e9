#!/bin/bash
# Harbor's contract: the reward goes to /logs/verifier/reward.txt; this output is only a log.
if [ "$(tr -d '[:space:]' < /app/hello.txt 2>/dev/null)" = hello ]; then
  echo 1 > /logs/verifier/reward.txt
  echo "hello.txt holds hello"
else
  echo 0 > /logs/verifier/reward.txt
  echo "hello.txt is missing or does not hold hello"
fi
