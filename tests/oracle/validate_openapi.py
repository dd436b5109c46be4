#!/usr/bin/env python3
"""Validates the OpenAPI 3.1 document on stdin with openapi-spec-validator (pinned in
requirements.txt): the OpenAPI 3.1 schema plus the validator's semantic checks (path
parameters declared, operationIds unique, $refs resolved, schemas valid JSON Schema).

Exit status: 0 valid; 1 invalid, every error on stderr; 2 not a JSON object.
Used by tests/tests/openapi.rs on the gateway's GET /openapi.json.
"""

import json
import sys

from openapi_spec_validator import OpenAPIV31SpecValidator


def main() -> int:
    try:
        doc = json.load(sys.stdin)
    except ValueError as e:
        print(f"not JSON: {e}", file=sys.stderr)
        return 2
    if not isinstance(doc, dict):
        print(f"not a JSON object but {type(doc).__name__}", file=sys.stderr)
        return 2
    version = doc.get("openapi")
    if not isinstance(version, str) or not version.startswith("3.1."):
        print(f"not an OpenAPI 3.1 document: openapi is {version!r}", file=sys.stderr)
        return 1
    errors = list(OpenAPIV31SpecValidator(doc).iter_errors())
    for i, e in enumerate(errors, 1):
        where = "/".join(str(p) for p in getattr(e, "absolute_path", []) or [])
        print(f"[{i}] {where or '(document)'}: {e.message}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
