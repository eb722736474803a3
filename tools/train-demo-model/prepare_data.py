"""Dumps the King James Bible from Debian's bible-kjv package into plain text for training.

Usage: python3 prepare_data.py OUT_DIR        (needs the `bible` command: apt-get install -y bible-kjv)

Writes OUT_DIR/train.txt (every book but Ruth) and OUT_DIR/heldout.txt (Ruth, held out for
evaluation). One chapter is one document: a heading line "Book N", then one verse per line
without its number; documents are separated by a blank line.
"""
import os
import re
import subprocess
import sys

HELD_OUT = "Ruth"

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
# -l100000: one verse per line (no wrapping); the whole Bible, Genesis 1:1 to Revelation 22:21.
raw = subprocess.run(["bible", "-l100000", "Gen1:1-Rev22:21"], check=True, capture_output=True,
                     text=True).stdout
heading = re.compile(r"^((?:[1-3] )?[A-Z][A-Za-z ]+) (\d+)$")
verse = re.compile(r"^\s+(\d+) (.*)$")
chapters = []  # (book, heading, [verses])
for line in raw.splitlines():
    if not line.strip():
        continue
    m = heading.match(line)
    if m:
        chapters.append((m.group(1), line.strip(), []))
        continue
    v = verse.match(line)
    if not v:
        raise SystemExit("unexpected line: " + repr(line))
    chapters[-1][2].append(v.group(2).strip())

def doc(ch):
    return ch[1] + "\n" + "\n".join(ch[2]) + "\n"

train = [doc(c) for c in chapters if c[0] != HELD_OUT]
held = [doc(c) for c in chapters if c[0] == HELD_OUT]
with open(os.path.join(out, "train.txt"), "w") as f:
    f.write("\n".join(train))
with open(os.path.join(out, "heldout.txt"), "w") as f:
    f.write("\n".join(held))
verses = sum(len(c[2]) for c in chapters)
print(f"{len(chapters)} chapters, {verses} verses; train {len(train)} chapters, held out ({HELD_OUT}) {len(held)}")
