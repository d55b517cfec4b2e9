"""The paraphrase generator: the trained families' jobs, worded in ways training never shows and
filled with names and values from pools training never draws from.

Kept apart from the training templates (templates.py) and pools (pools.py) on purpose: nothing
here is imported by the train split, and the tests check that the wordings and the pools are
disjoint from training's. The wordings differ in more than synonyms: requests, context sentences,
the file named before the action, second-person stories, terse imperative notes.
"""

from __future__ import annotations

from harnessrl.tasks.suite.pools import Pools

PARAPHRASE_POOLS = Pools(
    "paraphrase",
    words=tuple("""
        apricot barley bluebell buffalo caribou cobbler condor cucumber dahlia ferret fennel gondola
        gopher grapefruit hamster hickory ibis kelp kingfisher lentil magpie mackerel manatee marigold
        mongoose muffin nugget oatmeal orca paprika parsnip peacock pecan peony pheasant pistachio
        porcupine puffin quince sardine scallop seahorse sorrel starling sturgeon tamarind tangerine
        teapot toucan truffle violin waffle wigeon yucca zucchini beaver bobcat chipmunk""".split()),
    stems=tuple("""
        chronicle memoir pamphlet transcript diary blueprint portfolio scrapbook notebook booklet
        handout logbook roadmap snapshot checklist worksheet""".split()),
    dirs=tuple("cabinet drawer folio hangar stash trunk satchel hamper closet annex".split()),
    exts=("txt", "txt", "text", "out", "cfg"),
)

PARAPHRASES: dict[str, tuple[str, ...]] = {
    "write_word": (
        "I need a new file, {name}. Its text should be {word} and nothing else.",
        "Could you store {word} in {name}? The file does not exist yet.",
        "{name} should end up holding exactly one word: {word}.",
        "Please produce {name} containing {word}.",
        "The next step needs a file called {name} that reads {word}. Set that up.",
    ),
    "touch_file": (
        "I need {name} to exist. Nothing has to be in it.",
        "Please set up a blank {name} here.",
        "{name} is missing; create it with no content.",
        "There should be a file called {name} in this folder, even if it is blank. Make sure there is.",
        "Could you add a zero-length file named {name}?",
    ),
    "delete_file": (
        "{name} is not needed any more; please remove it and nothing else.",
        "Could you clean up by deleting {name}?",
        "I want {name} gone. Keep everything else as it is.",
        "Please throw away {name}.",
        "The file {name} was made by mistake. Remove it.",
    ),
    "rename_file": (
        "{src} has the wrong name. It should be called {dst}.",
        "Please move {src} over to {dst}; only the new name should remain.",
        "I would like {src} to be known as {dst} from now on.",
        "Could you rename {src}? Use {dst} as its name.",
        "After you are done, {dst} should exist with the text of {src}, and {src} should not.",
    ),
    "copy_file": (
        "I need a second file, {dst}, with the same text as {src}. Keep {src} too.",
        "Could you clone {src} into {dst}?",
        "{dst} should be an exact copy of {src}.",
        "Please back up {src} under the name {dst}, leaving the original in place.",
        "Make {dst} hold the same contents as {src}.",
    ),
    "overwrite": (
        "{name} holds old text. Throw it away and put {word} there instead.",
        "Could you make {word} the only thing in {name}?",
        "Please discard what {name} says and write {word} into it.",
        "I want {name} to read {word}, nothing else.",
        "The text of {name} is out of date; it should just say {word}.",
    ),
    "csv_count_rows": (
        "I need to know how many lines {src} has, the header line too. Put that number in {out}.",
        "Could you figure out the line count of {src} and record it in {out}?",
        "{out} should contain a single number: how many lines are in {src}.",
        "Please tally the lines of {src}, including the first one, and store the total in {out}.",
        "How long is {src} in lines? Save the answer to {out}.",
    ),
}
