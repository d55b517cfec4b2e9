"""The word tables of the wording generator (wording.py): per style, its frames (how a one-job
request is put: politeness, context), its joins (how several jobs are put in one request) and its
cores (the job itself, per job kind, in several orders: action first, file first, value first).

Four styles, in three groups that share no frame, join or core (tests/tasks/test_wording.py):

| style    | group    | grammar of a core                | example                                          |
|----------|----------|----------------------------------|--------------------------------------------------|
| plain    | train    | imperative                       | Could you delete amber3.note?                    |
| request  | train    | a need or a wish, declarative    | Quick request: amber3.note has to go.            |
| reworded | reworded | imperative, other verbs/frames   | Do me a favour and get rid of amber3.note.       |
| ticket   | style    | shorthand of a ticket or a list  | [ ] amber3.note => trash                         |

Slots: {name}, {word}, {src}, {dst}, {out} (the file jobs), {note} (the file a read-then-act job
names). Frames hold {core} (or {Core}, capitalised) and may hold {n} (a ticket number).
"""

from __future__ import annotations

FRAMES: dict[str, tuple[str, ...]] = {
    "plain": ("{Core}.", "Please {core}.", "Could you {core}?", "Can you {core}, please?",
              "I need you to {core}.", "Your task: {core}.", "Go ahead and {core}.", "Kindly {core}."),
    "request": ("{Core}.", "{Core}, please.", "Hi, {core}. Thanks!", "Quick request: {core}.",
                "When you get a chance: {core}.", "Heads up, {core}.", "Small thing: {core}.",
                "One more item for today: {core}."),
    "reworded": ("Would you {core}?", "It would help a lot if you could {core}.", "Before lunch, {core}.",
                 "Here is a small job for you: {core}.", "Do me a favour and {core}.",
                 "Mind helping out? {Core}.", "The goal is simple: {core}.", "Be so kind as to {core}."),
    "ticket": ("TODO: {core}", "[ ] {core}", "ticket #{n}: {core}", "[{n}] {core}", "{core} (asap)",
               "note to self -- {core}", "task >> {core}", "pending | {core}"),
}

# (first, middle, last, separator): {c} a clause, {C} the clause capitalised, {i} its number
JOINS: dict[str, tuple[tuple[str, str, str, str], ...]] = {
    "plain": (("First, {c}.", "Then {c}.", "Finally, {c}.", " "),
              ("{C}.", "After that, {c}.", "Last, {c}.", " "),
              ("Do the following:\n{i}. {c}", "{i}. {c}", "{i}. {c}", "\n"),
              ("Please {c},", "then {c},", "and at the end {c}.", " ")),
    "request": (("I need a few things. {C}.", "Also, {c}.", "And {c}.", " "),
                ("Two or more small requests: {c};", "{c};", "and {c}.", " "),
                ("Hi! {C}.", "Besides that, {c}.", "Lastly, {c}. Thanks!", " ")),
    "reworded": (("To begin with, {c}.", "Once that is done, {c}.", "To wrap up, {c}.", " "),
                 ("Here is the plan. Step one: {c}.", "Afterwards, {c}.", "As the closing move, {c}.", " "),
                 ("A short run of chores, in this sequence:\n({i}) {c}", "({i}) {c}", "({i}) {c}", "\n")),
    "ticket": (("TODO:\n- {c}", "- {c}", "- {c}", "\n"),
               ("[{i}] {c}", "[{i}] {c}", "[{i}] {c}", "\n"),
               ("{c} / ", "{c} / ", "{c}", "")),
}

CORES: dict[str, dict[str, tuple[str, ...]]] = {
    "plain": {
        "write_word": ("write the word {word} into a file named {name}", "create {name} containing {word}",
                       "put {word} in a new file {name}", "in a file called {name}, write {word}"),
        "touch_file": ("create an empty file named {name}", "make a blank file {name}",
                       "add an empty file called {name}"),
        "delete_file": ("delete {name}", "remove the file {name}", "delete the file called {name}"),
        "rename_file": ("rename {src} to {dst}", "change the name of {src} to {dst}",
                        "give {src} the new name {dst}"),
        "copy_file": ("copy {src} to {dst}", "make a copy of {src} called {dst}",
                      "from {src}, make a copy named {dst}"),
        "overwrite": ("replace the text of {name} with {word}", "overwrite {name} so it only says {word}",
                      "set the contents of {name} to {word}"),
        "csv_count_rows": ("count the lines of {src} and write the number to {out}",
                           "write the line count of {src} into {out}",
                           "into {out}, write how many lines {src} has"),
        "lookup_delete": ("read {note} and delete the file it names", "delete the file whose name is in {note}",
                          "open {note}, find the file it names, and delete that file"),
        "lookup_write": ("read {note} and write the word it gives into {out}",
                         "write the word named in {note} into {out}",
                         "look up the word in {note} and save it to {out}"),
        "lookup_copy": ("read {note} and copy the file it names to {out}", "copy the file named in {note} to {out}",
                        "find the file that {note} names and make a copy of it called {out}"),
    },
    "request": {
        "write_word": ("{name} should hold the word {word}", "I want a file {name} with the word {word} in it",
                       "the word {word} needs to go into a new file, {name}"),
        "touch_file": ("{name} should exist, even if it is empty", "I want an empty file called {name}",
                       "there needs to be a blank {name} here"),
        "delete_file": ("{name} has to go", "I want {name} deleted", "the file {name} is no longer needed, delete it"),
        "rename_file": ("{src} should be called {dst}", "I want {src} renamed to {dst}",
                        "the file {src} needs the name {dst} instead"),
        "copy_file": ("{dst} should be a copy of {src}", "I want a copy of {src} named {dst}",
                      "the file {src} needs a duplicate called {dst}"),
        "overwrite": ("{name} should say {word} and nothing else", "I want the old text of {name} replaced by {word}",
                      "the only text in {name} needs to be {word}"),
        "csv_count_rows": ("{out} should hold the number of lines in {src}", "I want the line count of {src} in {out}",
                           "the number of lines of {src} needs to be written to {out}"),
        "lookup_delete": ("{note} names a file that has to go, so delete that file",
                          "I want the file mentioned in {note} deleted",
                          "the file listed in {note} is no longer needed and should be removed"),
        "lookup_write": ("{out} should hold the word written in {note}", "I want the word from {note} put into {out}",
                         "the word that {note} gives needs to be saved in {out}"),
        "lookup_copy": ("{out} should be a copy of the file that {note} names",
                        "I want a copy of the file mentioned in {note}, saved as {out}",
                        "the file listed in {note} needs a duplicate called {out}"),
    },
    "reworded": {
        "write_word": ("stash the word {word} inside a fresh file {name}", "jot down {word} in {name}",
                       "make sure a file {name} exists whose only text is {word}"),
        "touch_file": ("bring a zero-length file {name} into being", "set up {name} with no content at all",
                       "produce a file {name} that holds nothing"),
        "delete_file": ("get rid of {name}", "throw away {name}", "erase {name} and leave the rest alone"),
        "rename_file": ("switch the name of {src} over to {dst}", "let {src} be known as {dst} from now on",
                        "move {src} so that it lives under the name {dst}"),
        "copy_file": ("clone {src} into {dst}", "back up {src} under the name {dst}",
                      "duplicate {src}, calling the duplicate {dst}"),
        "overwrite": ("wipe what {name} says and put {word} there", "let {name} read just {word}",
                      "discard the text of {name} in favour of {word}"),
        "csv_count_rows": ("tally the lines of {src} and record the figure in {out}",
                           "find out how long {src} is in lines and note that in {out}",
                           "store the length of {src}, counted in lines, in {out}"),
        "lookup_delete": ("get rid of whichever file {note} points to",
                          "have a look at {note} and throw away the file it mentions",
                          "erase the file that {note} refers to"),
        "lookup_write": ("fetch the word {note} mentions and jot it down in {out}",
                         "check which word {note} holds and stash it in {out}",
                         "take the word found in {note} and record it in {out}"),
        "lookup_copy": ("duplicate whichever file {note} points to, under the name {out}",
                        "clone the file that {note} refers to into {out}",
                        "have a look at {note} and back up the file it mentions as {out}"),
    },
    "ticket": {
        "write_word": ("{name} <- {word}", "word={word} file={name}", "new file {name}, text: {word}"),
        "touch_file": ("{name} (empty, new)", "blank file => {name}", "new empty {name}"),
        "delete_file": ("{name} => trash", "del {name}", "drop file {name}"),
        "rename_file": ("{src} => {dst} (rename)", "mv-name {src} as {dst}", "rename: {src} / {dst}"),
        "copy_file": ("{src} => {dst} (copy)", "dup {src} as {dst}", "copy: {src} / {dst}"),
        "overwrite": ("{name} := {word}", "replace text of {name} w/ {word}", "{name}: text now {word}"),
        "csv_count_rows": ("#lines({src}) => {out}", "linecount {src} -> {out}", "count: {src} / {out}"),
        "lookup_delete": ("target in {note} => trash", "del (file named in {note})", "cleanup per {note}"),
        "lookup_write": ("word from {note} => {out}", "{out} <- (word in {note})", "lookup {note}, word -> {out}"),
        "lookup_copy": ("(file named in {note}) => {out} (copy)", "dup target of {note} as {out}",
                        "copy per {note} -> {out}"),
    },
}
