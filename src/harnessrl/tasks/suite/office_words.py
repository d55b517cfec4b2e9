"""Wordings of the office families: training templates (train and test splits), paraphrases
(paraphrase split, never shown in training) and the never-trained families' own templates
(unseen split). Every template of a family names every slot its job fills."""

from __future__ import annotations

OFFICE_TRAINING: dict[str, tuple[str, ...]] = {
    "region_report": (
        "Read the sales CSV {src} (columns region, rep, amount) and write a markdown report to {out}: a "
        "table with the columns region and total, one row per region in alphabetical order, where total "
        "is the sum of amount over that region's rows.",
        "Write a markdown file {out} with a table of the total amount per region in {src}. Use two columns, "
        "region and total, and list the regions alphabetically, one row each.",
        "Sum the amount column of {src} for each region and put the result in {out} as a markdown table "
        "(columns: region, total), sorted by region name.",
        "Create {out}: a markdown table that gives, for every region in {src}, the sum of its amounts. "
        "Columns region and total; rows in alphabetical order of region.",
    ),
    "error_codes": (
        "Find every distinct error code in the log {src} (the code after ERROR on each error line) and "
        "write them to {out}, one per line, sorted, without duplicates.",
        "List the error codes that appear on ERROR lines of {src} in {out}: each code once, one per line, "
        "in sorted order.",
        "Extract the codes of the ERROR entries of {src}, remove duplicates, sort them and save them to "
        "{out} with one code per line.",
        "Write the sorted list of unique error codes from the ERROR lines of {src} into {out}, one per line.",
    ),
    "json_table": (
        "Convert {src}, a JSON list of records, into a CSV file {out} with the columns {cols} in that "
        "order: a header line, then one line per record in the order of the list.",
        "Turn the records in {src} into a CSV table {out}. The header must be the columns {cols} (in this "
        "order), followed by one row per record, keeping the records' order.",
        "Write {out} as CSV built from the JSON array in {src}: first the header with {cols}, then one row "
        "for each record, in the same order as in the file.",
        "Make a CSV version of {src} in {out} with the columns {cols} in that order, one row per record "
        "after the header line.",
    ),
}

OFFICE_PARAPHRASES: dict[str, tuple[str, ...]] = {
    "region_report": (
        "Our manager wants a quick summary: {src} lists sales by region, rep and amount. Please drop a "
        "markdown table into {out} giving each region's combined amount (headers region and total), "
        "regions A to Z.",
        "I need {out} to hold a markdown grid with two headings, region and total, where total adds up "
        "every amount of that region in {src}. Order the regions alphabetically.",
        "Could you aggregate {src} by region? The figures belong in {out}, formatted as a markdown table "
        "whose headings are region and total, alphabetised by region.",
    ),
    "error_codes": (
        "Our on-call engineer needs the unique failure codes from {src}: only those on ERROR lines, "
        "deduplicated, ascending, each on its own line in {out}.",
        "Could you go through {src} and collect the codes that come right after the word ERROR? Save them "
        "to {out}, each just once, in ascending order, one on a line.",
        "{out} should end up with every error code that {src} reports, no repeats, ordered ascending, a "
        "single code per line.",
    ),
    "json_table": (
        "A colleague wants the JSON in {src} as a spreadsheet-friendly CSV. Please produce {out} with the "
        "heading line {cols} (exactly this column order) and a line for each record, order preserved.",
        "Could you flatten the record list of {src} into {out}? Comma-separated, heading {cols} in that "
        "sequence, then each record on its own line as they appear.",
        "{out} should become a comma-separated table of {src}: heading {cols}, this order, and a line per "
        "record, same sequence as the source.",
    ),
}

OFFICE_UNSEEN: dict[str, tuple[str, ...]] = {
    "ini_key": (
        "In the INI file {name}, set {key} in the [{section}] section to {value}. Change only that line: "
        "every other line must stay byte-for-byte the same.",
        "Edit {name}: the key {key} of section [{section}] should be {value}. Leave all other lines exactly "
        "as they are (same spacing, comments and order).",
        "Update {name} so that [{section}] has {key} = {value}; nothing else in the file may change.",
    ),
    "fix_calc": (
        "Running `python3 {test}` fails. Fix the bug in {module} so that the tests pass; do not change "
        "{test}.",
        "The tests in {test} do not pass. Find the wrong function in {module} and fix it (leave {test} as "
        "it is), so that `python3 {test}` succeeds.",
        "Make `python3 {test}` pass by repairing {module}. The test file itself must not be edited.",
    ),
    "plan_order": (
        "{src} lists tasks (column task) and the task each one needs done first (column needs; - for "
        "none). Write a plan to {out}: every task once, one per line, each after the task it needs.",
        "Plan the work in {src}: write the tasks to {out}, one per line, in an order where every task comes "
        "after the task named in its needs column (- means it needs nothing).",
        "Using the dependencies in {src} (task, needs), put all tasks into {out} one per line so that no "
        "task appears before the one it needs.",
    ),
}
