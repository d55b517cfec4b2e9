"""Instruction templates of the built-in suite (not the paraphrase set: see `paraphrase.py`).

`TRAINING` words the trained families in the train split and in their held-out test split (the
test split differs in its names and values, not in its wording). `UNSEEN` words the families that
are never trained on. Slots are filled from the family's Job (families.py).
"""

from __future__ import annotations

TRAINING: dict[str, tuple[str, ...]] = {
    "write_word": (
        "Create a file named {name} that contains the word {word}.",
        "Write the word {word} into a new file called {name}.",
        "Make a file {name} whose only content is the word {word}.",
        "Put the word {word} in a file named {name}.",
        "Create {name} with the word {word} in it.",
        "Save the word {word} to the file {name}.",
    ),
    "touch_file": (
        "Create an empty file named {name}.",
        "Make a new empty file called {name}.",
        "Create the file {name}; it can stay empty.",
        "Create a new empty file {name}.",
        "Make an empty file with the name {name}.",
        "Add an empty file {name} to the current directory.",
    ),
    "delete_file": (
        "Delete the file {name}.",
        "Remove {name} from the current directory.",
        "Erase the file {name}.",
        "Delete {name} and leave the other files alone.",
        "Remove the file named {name}.",
        "Get rid of the file {name}.",
    ),
    "rename_file": (
        "Rename the file {src} to {dst}.",
        "Move {src} to the new name {dst}.",
        "Change the name of {src} to {dst}.",
        "Rename {src} so that it is called {dst}.",
        "Give the file {src} the new name {dst}.",
        "Rename {src} as {dst}.",
    ),
    "copy_file": (
        "Copy the file {src} to a file named {dst}.",
        "Make a copy of {src} called {dst}.",
        "Duplicate {src} as {dst}.",
        "Copy {src} to a new file {dst}.",
        "Create {dst} as a copy of {src}.",
        "Copy the contents of {src} into a new file {dst}.",
    ),
    "overwrite": (
        "Replace the contents of {name} with the single word {word}.",
        "Overwrite {name} so that it contains only the word {word}.",
        "Change the text of {name} to just {word}.",
        "Replace the text in {name} with the word {word}.",
        "Make {name} contain only the word {word}, replacing what is there.",
        "Set the content of {name} to the word {word}.",
    ),
    "csv_count_rows": (
        "Count the rows of {src}, header included, and save the number in {out}.",
        "How many lines does the CSV file {src} have? Write the number into {out}.",
        "Write the number of rows in {src} (counting the header) to {out}.",
        "Save the number of lines of {src} in {out}.",
        "Count the lines in {src} and write that number to {out}.",
        "Put the line count of {src} into the file {out}.",
    ),
}

UNSEEN: dict[str, tuple[str, ...]] = {
    "make_dir": (
        "Create a directory named {d}.",
        "Make a new folder called {d}.",
        "Create the folder {d}.",
    ),
    "empty_file": (
        "Remove all the text from {name} but keep the file.",
        "Make {name} an empty file (do not delete it).",
        "Clear the contents of {name}; the file must stay.",
    ),
    "append_line": (
        "Add a line with the word {word} to the end of {name}.",
        "Append the line {word} to the file {name}.",
        "At the bottom of {name}, add one more line: {word}",
    ),
    "replace_word": (
        "In the file {name}, replace the word {old} with {new}.",
        "Edit {name}: change {old} to {new}.",
        "Substitute {new} for {old} in {name}.",
    ),
    "csv_header": (
        "Write the header row of the CSV file {src} to {out}.",
        "Copy the first line of {src} into a file named {out}.",
        "Save the column names line of {src} to {out}.",
    ),
    "csv_grep": (
        "Save the lines of {src} that contain {word} into {out}.",
        "Find the rows of {src} with the word {word} and write them to {out}.",
        "Copy every line of {src} that mentions {word} into {out}.",
    ),
    "json_field": (
        "Read {src} and write the value of its \"{key}\" field into {out}.",
        "The JSON file {src} has a field named {key}. Save that field's value in {out}.",
        "Extract the {key} value from {src} and store it in {out}.",
    ),
    "csv_sum": (
        "Add up the qty column of {src} and write the total into {out}.",
        "Compute the sum of all qty values in {src}; save the number in {out}.",
        "What is the total qty in {src}? Write just the number to {out}.",
    ),
    "mkdir_write": (
        "Create a directory named {d} and inside it a file {name} containing the word {word}.",
        "Make a folder {d}, then write the word {word} into {d}/{name}.",
        "Create the file {d}/{name} (make the {d} directory first) with the word {word} in it.",
    ),
    "count_lines": (
        "Count the lines of {src} and write the count into {out}.",
        "How many lines does {src} have? Write the number to {out}.",
        "Save the number of lines in {src} to the file {out}.",
    ),
    "list_dir": (
        "Write the names of the files in the directory {d}, one per line, into {out}.",
        "List the files inside {d} and save that list to {out}.",
        "Put the file names found in {d}/ into {out}, one name per line.",
    ),
}
