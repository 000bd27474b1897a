#!/usr/bin/python3
"""Writes tests/data/sample.safetensors with Python's struct and json only (no safetensors
package), so the C++ reader is tested against a file that our writer did not make.

The header is written the way Python's json.dumps writes it (spaces after ',' and ':'), its key
order differs from the order of the data (and "__metadata__" sits between tensors), and it is
padded with spaces to a multiple of 8 bytes. tests/nn/test_safetensors.cpp checks the values
below: weight = 0.5 i - 1 (i = 0..5), bias = [1/3, -2.25, 1e-300], ids = [-1, 0, 2^40, 7],
scalar = 3, empty has no elements.

    /usr/bin/python3 tools/make_safetensors_sample.py
"""
import json
import os
import struct

# name: (dtype, struct code, shape, values); the data section holds them in this order.
TENSORS = {
    "bias": ("F64", "d", [3], [1 / 3, -2.25, 1e-300]),
    "ids": ("I64", "q", [2, 2], [-1, 0, 2**40, 7]),
    "weight": ("F32", "f", [2, 3], [0.5 * i - 1 for i in range(6)]),
    "scalar": ("F32", "f", [], [3.0]),
    "empty": ("F32", "f", [0, 4], []),
}
HEADER_ORDER = ["weight", "__metadata__", "bias", "ids", "empty", "scalar"]


def main():
    data = b""
    entries = {}
    for name, (dtype, code, shape, values) in TENSORS.items():
        chunk = struct.pack("<%d%s" % (len(values), code), *values)
        entries[name] = {"dtype": dtype, "shape": shape,
                         "data_offsets": [len(data), len(data) + len(chunk)]}
        data += chunk
    entries["__metadata__"] = {"format": "pt", "written_by": "python struct + json"}
    header = json.dumps({key: entries[key] for key in HEADER_ORDER}).encode("utf-8")
    header += b" " * (-len(header) % 8)
    out = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "sample.safetensors")
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)


if __name__ == "__main__":
    main()
