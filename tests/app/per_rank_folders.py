"""Writes WORK/a/model and WORK/b/model: two copies of a Hugging Face Llama folder that differ
only in one thing, for two ranks that give the same --init-from model from the working folders
WORK/a and WORK/b.

  python3 per_rank_folders.py SOURCE WORK rope_scaling   b's config.json has no rope_scaling
  python3 per_rank_folders.py SOURCE WORK weights        b's last weight differs in one bit
"""
import json
import pathlib
import shutil
import sys


def main() -> None:
    source, work, difference = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
    for side in ("a", "b"):
        shutil.rmtree(work / side, ignore_errors=True)
        shutil.copytree(source, work / side / "model")
    b = work / "b" / "model"
    if difference == "rope_scaling":
        config = json.loads((b / "config.json").read_text())
        config["rope_scaling"] = None
        (b / "config.json").write_text(json.dumps(config, indent=2))
    elif difference == "weights":
        weights = bytearray((b / "model.safetensors").read_bytes())
        weights[-4] ^= 1  # the lowest mantissa byte of the last float32 value
        (b / "model.safetensors").write_bytes(weights)
    else:
        sys.exit(f"unknown difference {difference!r}")


if __name__ == "__main__":
    main()
