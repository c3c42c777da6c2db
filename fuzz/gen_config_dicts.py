#!/usr/bin/env python3
"""Writes fuzz/dict/config_toml.dict and config_json.dict from `relgrad train --help-config`.

usage: build/relgrad train --help-config | python3 fuzz/gen_config_dicts.py fuzz/dict
Each help line reads "key (type[: enum|values]) = default  — meaning".
"""
import re
import sys

out_dir = sys.argv[1] if len(sys.argv) > 1 else "fuzz/dict"
keys, leaves, tables, enums = [], set(), set(), set()
for line in sys.stdin.read().splitlines():
    m = re.match(r"^(\S+) \(([^)]*)\)", line)
    if not m:
        continue
    key, kind = m.group(1), m.group(2)
    keys.append(key)
    parts = key.split(".")
    leaves.add(parts[-1])
    tables.update(".".join(parts[:i]) for i in range(1, len(parts)))
    if ":" in kind:
        enums.update(kind.split(":", 1)[1].strip().split("|"))


def esc(s):
    return s.replace("\\", "\\\\").replace('"', '\\"')


header = ("# libFuzzer dictionary (-dict=) for fuzz_config_{}: the config keys, tables and enum values of\n"
          "# `relgrad train --help-config`, written by fuzz/gen_config_dicts.py (rerun it when keys change).\n")
with open(f"{out_dir}/config_toml.dict", "w") as f:
    f.write(header.format("toml"))
    f.writelines(f'"[{esc(t)}]"\n' for t in sorted(tables))
    f.writelines(f'"{esc(k)} = "\n' for k in sorted(leaves) + keys)
    f.writelines(f'"\\"{esc(e)}\\""\n' for e in sorted(enums))
    for x in ["true", "false", "inf", "nan", "-inf", "1e308", "0x7fffffffffffffff", "9223372036854775808",
              '"""', "'''", "[[", "]]", "{ ", " }", "# ", "\\u0000", "1979-05-27T07:32:00Z"]:
        f.write(f'"{esc(x)}"\n')
with open(f"{out_dir}/config_json.dict", "w") as f:
    f.write(header.format("json"))
    f.writelines(f'"\\"{esc(k)}\\": "\n' for k in sorted(tables | leaves) + keys)
    f.writelines(f'"\\"{esc(e)}\\""\n' for e in sorted(enums))
    for x in ["true", "false", "null", "{", "}", "[", "]", "1e308", "-1", "9223372036854775808",
              "18446744073709551616", "0.5", "\\u0000", "\\ud800"]:
        f.write(f'"{esc(x)}"\n')
print(f"{len(keys)} keys, {len(tables)} tables, {len(enums)} enum values -> {out_dir}")
