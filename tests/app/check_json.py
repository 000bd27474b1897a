"""Exits 1 unless FILE is one JSON object holding every KEY given: the --json report check.

    check_json.py FILE KEY...
"""
import json
import sys

with open(sys.argv[1]) as f:
    report = json.load(f)
missing = [key for key in sys.argv[2:] if key not in report]
if missing:
    sys.exit(f"check_json: {sys.argv[1]} lacks {', '.join(missing)}")
print(f"check_json: {sys.argv[1]} holds {', '.join(sys.argv[2:])}")
