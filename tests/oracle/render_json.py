#!/usr/bin/env python3
"""Renders protobuf messages as json_format.MessageToJson does, with the options the
gateway's [json] table names, for tests/tests/json_options.rs.

    python3 tests/oracle/render_json.py DESCRIPTOR_SET < cases.jsonl > answers.jsonl

Each input line: {"message": FULL_NAME, "proto": BASE64, "emit_unpopulated": bool,
"use_proto_names": bool, "enums_as_ints": bool, "indent": N}; each output line the JSON
string MessageToJson printed (indent 0: None, compact).
"""

import base64
import json
import os
import sys

from google.protobuf import json_format
from google.protobuf import message_factory

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracle import load_pool  # pylint: disable=wrong-import-position


def main():
  pool, _ = load_pool(sys.argv[1])
  for line in sys.stdin:
    case = json.loads(line)
    cls = message_factory.GetMessageClass(
        pool.FindMessageTypeByName(case['message']))
    msg = cls.FromString(base64.b64decode(case['proto']))
    text = json_format.MessageToJson(
        msg,
        always_print_fields_with_no_presence=case['emit_unpopulated'],
        preserving_proto_field_name=case['use_proto_names'],
        use_integers_for_enums=case['enums_as_ints'],
        indent=case['indent'] or None,
        descriptor_pool=pool,
    )
    print(json.dumps(text))


if __name__ == '__main__':
  main()
