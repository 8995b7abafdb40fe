#!/usr/bin/env python3
"""Writes the seed inputs of collector_fuzzer (tests/fuzz/collector_corpus/):
valid record streams in the fuzzer's input layout (collector_fuzzer.cc),
so that mutations start from records the parser accepts.

  python3 tests/fuzz/make_collector_corpus.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "collector_corpus")
COMMIT = 1 << 63


def rec(rtype, payload, commit=True):
    size = (8 + len(payload) + 7) & ~7
    return struct.pack("<Q", size | rtype << 32 | (COMMIT if commit else 0)) + \
        payload + b"\0" * (size - 8 - len(payload))


def names():
    return (rec(6, struct.pack("<QII", 0x100, 4, 0) + b"Node") +
            rec(7, struct.pack("<II", 1, 4) + b"main") +
            rec(4, struct.pack("<QII", 0x200, 4, 7) + b"make" + b"tree.mv") +
            rec(4, struct.pack("<QII", 0x300, 4, 7) + b"main" + b"tree.mv") +
            rec(5, struct.pack("<QqiI", 0x200, 3, 17, 0)) +
            rec(5, struct.pack("<QqiI", 0x300, 9, 40, 0)))


def alloc(tag, frames, commit=True, size=32, weight=4096.0):
    body = struct.pack("<QQdQII", tag, size, weight, 0x100, 1, len(frames))
    body += b"".join(struct.pack("<Qq", m, l) for m, l in frames)
    return rec(1, body, commit)


def seed(flags, records, write_pos=None):
    head = bytes([flags | (4 if write_pos is not None else 0)])
    return head + struct.pack("<Q", write_pos or 0) + records


def main():
    os.makedirs(OUT, exist_ok=True)
    stack = [(0x200, 3), (0x300, 9)]
    seeds = {
        "profile": seed(2, names() + alloc(1, stack) + alloc(2, stack) +
                        rec(2, struct.pack("<Q", 1)) + rec(3, struct.pack("<Q", 2))),
        "torn": seed(3, names() + alloc(1, stack) + alloc(2, stack, commit=False) +
                     alloc(3, stack)),
        "deep": seed(2, names() + alloc(1, stack * 40, size=200000, weight=200000.0)),
        "utf8": seed(2, rec(4, struct.pack("<QII", 0x200, 5, 6) + b"caf\xc3\xa9" + b"\xe2\x82\xac.mv")
                     + alloc(1, [(0x200, 0)])),
        "nofr": seed(0, alloc(7, []) + rec(2, struct.pack("<Q", 7))),
        "wpos": seed(0, names(), write_pos=1 << 20),
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
