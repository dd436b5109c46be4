#!/usr/bin/env python3
"""Reference-case generator for protogate's proto3-JSON transcoder.

Uses the official Python protobuf runtime (google.protobuf.json_format, pinned
in requirements.txt) as the oracle. Writes one JSON object per line to stdout;
see README.md next to this file for the line schema.

    python3 tests/oracle/oracle.py --descriptor-set FILE --seed N --count N > cases.jsonl

The output is a pure function of (descriptor set, seed, count, message): upb's
map iteration order is randomised per process, so map entries and Struct keys
are re-ordered (sorted) in every emitted dict/JSON text and all binary output
uses deterministic serialization (map entries sorted by key).
"""

import argparse
import base64
import json
import math
import struct
import sys

from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool as descriptor_pool_mod
from google.protobuf import json_format
from google.protobuf import message_factory
from google.protobuf.descriptor import FieldDescriptor as FD

import random

DEFAULT_MESSAGE = 'protogate.test.v1.KitchenSink'
NODE_MESSAGE = 'protogate.test.v1.Node'

# Deepest message nesting level (root message = 1) a random case may reach.
# The Rust renderer refuses depth > 100; stay well below it.
MAX_RANDOM_DEPTH = 85
# Upper bound on the number of sub-messages created per random top message.
MESSAGE_BUDGET = 160

UNKNOWN_FIELD_NUMBERS = range(900, 1000)

WRAPPER_TYPES = {
    'google.protobuf.DoubleValue',
    'google.protobuf.FloatValue',
    'google.protobuf.Int64Value',
    'google.protobuf.UInt64Value',
    'google.protobuf.Int32Value',
    'google.protobuf.UInt32Value',
    'google.protobuf.BoolValue',
    'google.protobuf.StringValue',
    'google.protobuf.BytesValue',
}

INT_LIMITS = {
    FD.TYPE_INT32: (-2**31, 2**31 - 1),
    FD.TYPE_SINT32: (-2**31, 2**31 - 1),
    FD.TYPE_SFIXED32: (-2**31, 2**31 - 1),
    FD.TYPE_INT64: (-2**63, 2**63 - 1),
    FD.TYPE_SINT64: (-2**63, 2**63 - 1),
    FD.TYPE_SFIXED64: (-2**63, 2**63 - 1),
    FD.TYPE_UINT32: (0, 2**32 - 1),
    FD.TYPE_FIXED32: (0, 2**32 - 1),
    FD.TYPE_UINT64: (0, 2**64 - 1),
    FD.TYPE_FIXED64: (0, 2**64 - 1),
}

NAN = float('nan')
INF = float('inf')

DOUBLE_EDGES = [
    NAN, INF, -INF, -0.0, 0.0, 5e-324, -5e-324, 1.7976931348623157e308,
    -1.7976931348623157e308, 2.2250738585072014e-308, 1.0, -1.0, 0.1, 1e21,
    1e-7, 9007199254740992.0, 9007199254740994.0, 0.30000000000000004,
    123456789.125, 1e100,
]
FLOAT_EDGES = [
    NAN, INF, -INF, -0.0, 0.0, 3.4028234663852886e38, -3.4028234663852886e38,
    1.401298464324817e-45, -1.401298464324817e-45, 1.1754943508222875e-38,
    0.1, 16777216.0, 16777218.0, 1.0, -1.5, 0.33333334,
]

STRING_POOLS = [
    'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789',
    ' _-.,:;',
    '"\\/',
    '\x00\x01\x07\x08\t\n\x0b\x0c\r\x1b\x1f\x7f',
    '\u00e9\u00df\u00f1\u00fc\u00a0\u0085',
    '\u4e2d\u6587\u5b57\u00e6\u0416',
    '\u2028\u2029\ufeff\ufffe\uffff\u200b',
    '\U0001f600\U0001f389\U0001d11e\U0010ffff\U00010000',
    '<>&\'=+%',
]

BYTES_EDGES = [
    b'', bytes(range(256)), b'\x00', b'\xff', b'\xfb\xff', b'\xfb\xff\xbf',
    b'\x00\x00', b'a', b'ab', b'abc', b'\xf8', b'\xfc\x00',
]


def _b64(data):
  return base64.b64encode(data).decode('ascii')


def _encode_varint(value):
  value &= (1 << 64) - 1
  out = bytearray()
  while True:
    bits = value & 0x7F
    value >>= 7
    if value:
      out.append(bits | 0x80)
    else:
      out.append(bits)
      return bytes(out)


def _is_wkt(message_descriptor):
  return message_descriptor.file.name.startswith('google/protobuf/')


def _is_map_field(field):
  return (
      field.type == FD.TYPE_MESSAGE
      and field.message_type.GetOptions().map_entry
  )


def _is_repeated(field):
  # `label` is deprecated in newer runtimes; prefer is_repeated when present.
  rep = getattr(field, 'is_repeated', None)
  if rep is not None:
    return rep
  return field.label == FD.LABEL_REPEATED


def load_pool(path):
  """Builds a fresh DescriptorPool from a binary FileDescriptorSet."""
  with open(path, 'rb') as fh:
    fds = descriptor_pb2.FileDescriptorSet.FromString(fh.read())
  by_name = {f.name: f for f in fds.file}
  pool = descriptor_pool_mod.DescriptorPool()
  added = set()
  proto3_optional = set()

  def add(name, stack=()):
    if name in added:
      return
    if name in stack:
      raise SystemExit('import cycle at %s' % name)
    fdp = by_name.get(name)
    if fdp is None:
      raise SystemExit(
          'descriptor set lacks %s (build it with --include_imports)' % name)
    for dep in fdp.dependency:
      add(dep, stack + (name,))
    pool.Add(fdp)
    added.add(name)

  def note_optional(prefix, messages):
    for m in messages:
      full = prefix + m.name
      for f in m.field:
        if f.proto3_optional:
          proto3_optional.add((full, f.name))
      note_optional(full + '.', m.nested_type)

  for fdp in fds.file:  # stable: the order of the set
    add(fdp.name)
    note_optional((fdp.package + '.') if fdp.package else '', fdp.message_type)
  return pool, proto3_optional


class Oracle(object):

  def __init__(self, pool, proto3_optional):
    self.pool = pool
    self.proto3_optional = proto3_optional
    self._classes = {}
    self._fields_by_any_name = {}

  def cls(self, full_name):
    c = self._classes.get(full_name)
    if c is None:
      c = message_factory.GetMessageClass(
          self.pool.FindMessageTypeByName(full_name))
      self._classes[full_name] = c
    return c

  def has_message(self, full_name):
    try:
      self.pool.FindMessageTypeByName(full_name)
      return True
    except KeyError:
      return False

  # ------------------------------------------------------------------
  # Canonical ordering of MessageToDict output (map keys / Struct keys).
  # ------------------------------------------------------------------
  def _field_lookup(self, desc):
    table = self._fields_by_any_name.get(desc.full_name)
    if table is None:
      table = {}
      for f in desc.fields:
        table[f.name] = f
        table[f.json_name] = f
      self._fields_by_any_name[desc.full_name] = table
    return table

  def canon(self, desc, obj):
    """Returns obj (a MessageToDict result for desc) with sorted map keys."""
    fn = desc.full_name
    if fn in WRAPPER_TYPES or fn in (
        'google.protobuf.Timestamp', 'google.protobuf.Duration',
        'google.protobuf.FieldMask', 'google.protobuf.Empty'):
      return obj
    if fn == 'google.protobuf.Struct':
      return self._canon_struct(obj)
    if fn == 'google.protobuf.Value':
      return self._canon_value(obj)
    if fn == 'google.protobuf.ListValue':
      return [self._canon_value(v) for v in obj]
    if fn == 'google.protobuf.Any':
      if not obj:
        return obj
      inner = self.pool.FindMessageTypeByName(obj['@type'].split('/')[-1])
      out = {'@type': obj['@type']}
      if inner.full_name in WRAPPER_TYPES or _is_wkt(inner):
        if 'value' in obj:
          out['value'] = self.canon(inner, obj['value'])
        return out
      rest = {k: v for k, v in obj.items() if k != '@type'}
      out.update(self._canon_regular(inner, rest))
      return out
    return self._canon_regular(desc, obj)

  def _canon_struct(self, obj):
    return {k: self._canon_value(obj[k]) for k in sorted(obj)}

  def _canon_value(self, obj):
    if isinstance(obj, dict):
      return self._canon_struct(obj)
    if isinstance(obj, list):
      return [self._canon_value(v) for v in obj]
    return obj

  def _canon_regular(self, desc, obj):
    table = self._field_lookup(desc)
    out = {}
    for key, val in obj.items():
      f = table.get(key)
      if f is None or f.type != FD.TYPE_MESSAGE:
        out[key] = val
        continue
      if _is_map_field(f):
        kf = f.message_type.fields_by_name['key']
        vf = f.message_type.fields_by_name['value']
        if kf.type in INT_LIMITS:
          keys = sorted(val, key=int)
        else:
          keys = sorted(val)
        if vf.type == FD.TYPE_MESSAGE:
          out[key] = {k: self.canon(vf.message_type, val[k]) for k in keys}
        else:
          out[key] = {k: val[k] for k in keys}
      elif _is_repeated(f):
        out[key] = [self.canon(f.message_type, v) for v in val]
      else:
        out[key] = self.canon(f.message_type, val)
    return out

  # ------------------------------------------------------------------
  # Case construction.
  # ------------------------------------------------------------------
  def render_case(self, case_id, msg, unknown):
    desc = msg.DESCRIPTOR
    case = {
        'kind': 'render',
        'id': case_id,
        'message': desc.full_name,
        'proto': _b64(msg.SerializeToString(deterministic=True)),
    }
    try:
      pool = self.pool
      dicts = [
          ('dict', json_format.MessageToDict(msg, descriptor_pool=pool)),
          ('dict_proto_names', json_format.MessageToDict(
              msg, preserving_proto_field_name=True, descriptor_pool=pool)),
          ('dict_enum_ints', json_format.MessageToDict(
              msg, use_integers_for_enums=True, descriptor_pool=pool)),
          ('dict_defaults', json_format.MessageToDict(
              msg, always_print_fields_with_no_presence=True,
              descriptor_pool=pool)),
      ]
    except Exception:  # pylint: disable=broad-except
      case['render_error'] = self.render_error(msg)
    else:
      for key, d in dicts:
        case[key] = self.canon(desc, d)
    case['unknown'] = unknown
    return case

  def _render_fails(self, msg):
    try:
      json_format.MessageToDict(msg, descriptor_pool=self.pool)
    except Exception as e:  # pylint: disable=broad-except
      return e
    return None

  def render_error(self, msg):
    """str() of MessageToDict's exception, made independent of map order.

    When several map entries (or Struct keys) cannot be rendered, which one
    MessageToDict trips over first depends on upb's per-process hash order.
    The message is pruned to the first failing element in a fixed order
    (fields by number, map keys sorted) and that is rendered instead; the
    result is one of the messages MessageToDict could raise for the full
    message.
    """
    return str(self._render_fails(self._prune(msg)))

  def _prune(self, msg):
    desc = msg.DESCRIPTOR
    fn = desc.full_name
    if fn == 'google.protobuf.Any':
      try:
        inner = self.cls(msg.type_url.split('/')[-1])()
      except KeyError:
        return msg
      inner.ParseFromString(msg.value)
      if self._render_fails(inner) is None:
        return msg
      out = type(msg)()
      out.type_url = msg.type_url
      out.value = self._prune(inner).SerializeToString(deterministic=True)
      return out
    if _is_wkt(desc) and fn not in ('google.protobuf.Struct',
                                    'google.protobuf.Value',
                                    'google.protobuf.ListValue'):
      return msg
    cls = type(msg)
    for f, v in msg.ListFields():
      if _is_map_field(f):
        kf = f.message_type.fields_by_name['key']
        vf = f.message_type.fields_by_name['value']
        for k in sorted(v.keys()):
          t = cls()
          if vf.type == FD.TYPE_MESSAGE:
            getattr(t, f.name)[k].CopyFrom(v[k])
          else:
            getattr(t, f.name)[k] = v[k]
          if self._render_fails(t) is None:
            continue
          if vf.type == FD.TYPE_MESSAGE:
            getattr(t, f.name)[k].CopyFrom(self._prune(v[k]))
          return t
        continue
      if _is_repeated(f):
        for item in v:
          t = cls()
          if f.type == FD.TYPE_MESSAGE:
            getattr(t, f.name).add().CopyFrom(item)
          else:
            getattr(t, f.name).append(item)
          if self._render_fails(t) is None:
            continue
          if f.type == FD.TYPE_MESSAGE:
            t = cls()
            getattr(t, f.name).add().CopyFrom(self._prune(item))
          return t
        continue
      t = cls()
      if f.type == FD.TYPE_MESSAGE:
        getattr(t, f.name).CopyFrom(v)
      else:
        setattr(t, f.name, v)
      if self._render_fails(t) is None:
        continue
      if f.type == FD.TYPE_MESSAGE:
        getattr(t, f.name).CopyFrom(self._prune(v))
      return t
    return msg

  def parse_case(self, case_id, full_name, text, ignore_unknown=False):
    case = {
        'kind': 'parse',
        'id': case_id,
        'message': full_name,
        'input': text,
    }
    if ignore_unknown:
      case['ignore_unknown'] = True
    msg = self.cls(full_name)()
    try:
      json_format.Parse(
          text, msg, ignore_unknown_fields=ignore_unknown,
          descriptor_pool=self.pool)
    except Exception as e:  # pylint: disable=broad-except
      case['ok'] = False
      case['error'] = str(e)
    else:
      case['ok'] = True
      self.reencode_any(msg)
      case['proto'] = _b64(msg.SerializeToString(deterministic=True))
    return case

  def reencode_any(self, msg):
    """Re-serializes every Any payload under msg deterministically.

    json_format.Parse packs Any payloads with a plain SerializeToString(), so
    map entries inside them come out in upb's per-process hash order. The
    payload is decoded and encoded again with deterministic=True (same
    message, map entries sorted) so that the output does not vary by run.
    """
    for f, v in msg.ListFields():
      if f.type != FD.TYPE_MESSAGE:
        continue
      if _is_map_field(f):
        vf = f.message_type.fields_by_name['value']
        if vf.type != FD.TYPE_MESSAGE:
          continue
        subs = [v[k] for k in v]
      elif _is_repeated(f):
        subs = list(v)
      else:
        subs = [v]
      for sub in subs:
        self.reencode_any(sub)
    if msg.DESCRIPTOR.full_name == 'google.protobuf.Any' and msg.type_url:
      try:
        inner = self.cls(msg.type_url.split('/')[-1])()
      except KeyError:
        return
      inner.ParseFromString(msg.value)
      self.reencode_any(inner)
      msg.value = inner.SerializeToString(deterministic=True)


# ----------------------------------------------------------------------
# Random message generation.
# ----------------------------------------------------------------------
class Generator(object):

  def __init__(self, oracle, rng):
    self.o = oracle
    self.rng = rng
    self.budget = 0
    self.any_depth = 0
    self.chain_used = False

  # -- scalars ----------------------------------------------------------
  def rand_int(self, ftype):
    rng = self.rng
    lo, hi = INT_LIMITS[ftype]
    r = rng.random()
    if r < 0.3:
      edges = [lo, hi, 0, 1, lo + 1, hi - 1]
      if lo < 0:
        edges += [-1, -1]
      if hi > 2**53:
        edges += [2**53 + 1, 2**53]
        if lo < 0:
          edges.append(-(2**53 + 1))
      return rng.choice(edges)
    if r < 0.65:
      return rng.randint(max(lo, -1000), min(hi, 1000))
    bits = rng.choice([8, 16, 31, 32, 53, 63, 64])
    v = rng.getrandbits(bits)
    if lo < 0 and rng.random() < 0.5:
      v = -v
    return min(max(v, lo), hi)

  def rand_double(self):
    rng = self.rng
    r = rng.random()
    if r < 0.3:
      return rng.choice(DOUBLE_EDGES)
    if r < 0.55:
      return struct.unpack('<d', rng.getrandbits(64).to_bytes(8, 'little'))[0]
    if r < 0.8:
      return round(rng.uniform(-1e6, 1e6), rng.randint(0, 6))
    return float(rng.randint(-10**9, 10**9))

  def rand_float(self):
    rng = self.rng
    r = rng.random()
    if r < 0.3:
      return rng.choice(FLOAT_EDGES)
    if r < 0.65:
      return struct.unpack('<f', rng.getrandbits(32).to_bytes(4, 'little'))[0]
    # Not float32-representable in general; the runtime rounds on store.
    return round(rng.uniform(-1e4, 1e4), rng.randint(0, 4))

  def rand_string(self, max_len=20):
    rng = self.rng
    n = rng.choice([0, 1, 2, 3, 5, 8, max_len])
    if rng.random() < 0.3:
      return ''.join(rng.choice(STRING_POOLS[0]) for _ in range(n))
    return ''.join(rng.choice(rng.choice(STRING_POOLS)) for _ in range(n))

  def rand_bytes(self):
    rng = self.rng
    if rng.random() < 0.3:
      return rng.choice(BYTES_EDGES)
    n = rng.randint(0, 40)
    return bytes(rng.getrandbits(8) for _ in range(n))

  def rand_enum(self, enum_type):
    rng = self.rng
    if enum_type.full_name == 'google.protobuf.NullValue':
      return 0
    if not enum_type.is_closed and rng.random() < 0.1:
      return rng.choice([17, 100, -1, 2**31 - 1, -2**31])
    return rng.choice([v.number for v in enum_type.values])

  def rand_scalar(self, f):
    t = f.type
    if t in INT_LIMITS:
      return self.rand_int(t)
    if t == FD.TYPE_DOUBLE:
      return self.rand_double()
    if t == FD.TYPE_FLOAT:
      return self.rand_float()
    if t == FD.TYPE_BOOL:
      return self.rng.random() < 0.5
    if t == FD.TYPE_STRING:
      return self.rand_string()
    if t == FD.TYPE_BYTES:
      return self.rand_bytes()
    if t == FD.TYPE_ENUM:
      return self.rand_enum(f.enum_type)
    raise ValueError('unsupported scalar type %d' % t)

  def default_scalar(self, f):
    t = f.type
    if t in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
      return 0.0
    if t == FD.TYPE_BOOL:
      return False
    if t == FD.TYPE_STRING:
      return ''
    if t == FD.TYPE_BYTES:
      return b''
    return 0

  def rand_map_key(self, kf):
    if kf.type == FD.TYPE_BOOL:
      return self.rng.random() < 0.5
    if kf.type == FD.TYPE_STRING:
      return self.rand_string(max_len=8)
    return self.rand_int(kf.type)

  # -- messages ---------------------------------------------------------
  def top(self, full_name):
    self.budget = MESSAGE_BUDGET
    self.any_depth = 0
    self.chain_used = False
    msg = self.o.cls(full_name)()
    density = self.rng.choice([0.0, 0.03, 0.1, 0.25, 0.5, 0.8])
    self.fill(msg, 1, density)
    return msg

  def fill_sub(self, msg, depth):
    """Fills a (present) sub-message at nesting level `depth`."""
    msg.SetInParent()
    if self.budget <= 0 or depth >= MAX_RANDOM_DEPTH:
      return
    self.budget -= 1
    self.fill(msg, depth, self.rng.choice([0.15, 0.4, 0.7]))

  def fill(self, msg, depth, density):
    d = msg.DESCRIPTOR
    fn = d.full_name
    if fn in WRAPPER_TYPES:
      self.fill_wrapper(msg)
      return
    handler = {
        'google.protobuf.Timestamp': self.fill_timestamp,
        'google.protobuf.Duration': self.fill_duration,
        'google.protobuf.FieldMask': self.fill_field_mask,
        'google.protobuf.Struct': self.fill_struct,
        'google.protobuf.Value': self.fill_value,
        'google.protobuf.ListValue': self.fill_list_value,
        'google.protobuf.Any': self.fill_any,
        'google.protobuf.Empty': lambda m, depth: m.SetInParent(),
    }.get(fn)
    if handler is not None:
      handler(msg, depth)
      return
    rng = self.rng
    chosen = {}
    for oneof in d.oneofs:
      if (d.full_name, oneof.fields[0].name) in self.o.proto3_optional:
        continue
      if rng.random() < density:
        chosen[oneof.full_name] = rng.choice(oneof.fields)
    for f in d.fields:
      oneof = f.containing_oneof
      if oneof is not None and oneof.full_name in chosen:
        if chosen[oneof.full_name] is f:
          self.set_field(msg, f, depth, allow_default=True)
        continue
      if oneof is not None and (d.full_name, f.name) not in self.o.proto3_optional:
        continue  # member of a real oneof that was not chosen
      p = density
      if f.type == FD.TYPE_MESSAGE and depth > 1:
        p *= 0.75 ** depth
      if (f.type == FD.TYPE_ENUM and _is_repeated(f)
          and f.enum_type.full_name == 'google.protobuf.NullValue'):
        p *= 0.2  # json_format cannot parse these back; keep them rare
      if (_is_map_field(f) and f.message_type.fields_by_name['value'].type
          == FD.TYPE_ENUM and f.message_type.fields_by_name['value']
          .enum_type.full_name == 'google.protobuf.NullValue'):
        p *= 0.2
      if rng.random() < p:
        self.set_field(msg, f, depth,
                       allow_default=(d.full_name, f.name)
                       in self.o.proto3_optional)

  def set_field(self, msg, f, depth, allow_default=False):
    rng = self.rng
    if _is_map_field(f):
      kf = f.message_type.fields_by_name['key']
      vf = f.message_type.fields_by_name['value']
      container = getattr(msg, f.name)
      for _ in range(rng.choice([0, 1, 1, 2, 3, 5])):
        key = self.rand_map_key(kf)
        if vf.type == FD.TYPE_MESSAGE:
          self.fill_sub(container[key], depth + 1)
        else:
          container[key] = self.rand_scalar(vf)
      return
    if _is_repeated(f):
      container = getattr(msg, f.name)
      if f.type == FD.TYPE_MESSAGE:
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
          self.fill_sub(container.add(), depth + 1)
      else:
        container.extend(
            self.rand_scalar(f) for _ in range(rng.choice([0, 1, 2, 3, 5, 8])))
      return
    if f.type == FD.TYPE_MESSAGE:
      sub = getattr(msg, f.name)
      if allow_default and rng.random() < 0.25:
        sub.SetInParent()
        return
      if not self.chain_used and rng.random() < 0.15 and self._self_field(
          f.message_type) is not None:
        self.chain_used = True
        self.deep_chain(sub, depth + 1)
        return
      self.fill_sub(sub, depth + 1)
      return
    if allow_default and rng.random() < 0.25:
      setattr(msg, f.name, self.default_scalar(f))
    else:
      setattr(msg, f.name, self.rand_scalar(f))

  @staticmethod
  def _self_field(desc):
    for g in desc.fields:
      if g.message_type is desc and not _is_repeated(g):
        return g
    return None

  def deep_chain(self, msg, depth):
    """Nests `msg` through its self-typed field 20..60 levels deep."""
    rng = self.rng
    field = self._self_field(msg.DESCRIPTOR)
    length = min(rng.randint(20, 60), MAX_RANDOM_DEPTH - depth - 2)
    cur = msg
    cur.SetInParent()
    for i in range(length):
      # A sparse filling at each level; no further chains.
      saved = self.budget
      self.budget = min(self.budget, 2)
      self.fill(cur, depth + i, 0.2)
      self.budget = saved
      cur.ClearField(field.name)
      cur = getattr(cur, field.name)
      cur.SetInParent()

  # -- well-known types -------------------------------------------------
  def fill_wrapper(self, msg, depth=0):
    vf = msg.DESCRIPTOR.fields_by_name['value']
    msg.SetInParent()
    if self.rng.random() < 0.25:
      msg.value = self.default_scalar(vf)
    else:
      msg.value = self.rand_scalar(vf)

  def fill_timestamp(self, msg, depth=0):
    rng = self.rng
    lo, hi = -62135596800, 253402300799
    r = rng.random()
    if r < 0.3:
      s, n = rng.choice([
          (lo, 0), (lo, 999999999), (hi, 0), (hi, 999999999), (0, 0),
          (-1, 999999999), (0, 1000000), (0, 1000), (0, 1), (951782400, 0),
      ])
    elif r < 0.31:  # out of range: MessageToDict must fail
      s, n = rng.choice([(hi + 1, 0), (lo - 1, 0), (0, -1), (0, 10**9)])
    else:
      s = rng.randint(lo, hi)
      n = rng.choice([0, rng.randint(0, 999) * 10**6,
                      rng.randint(0, 999999) * 1000, rng.randint(0, 10**9 - 1)])
    msg.SetInParent()
    msg.seconds = s
    msg.nanos = n

  def fill_duration(self, msg, depth=0):
    rng = self.rng
    mx = 315576000000
    r = rng.random()
    if r < 0.3:
      s, n = rng.choice([
          (mx, 999999999), (-mx, -999999999), (mx, 0), (-mx, 0), (0, 0),
          (0, -1), (0, 1), (-1, 0), (0, -500000000), (1, 500000000),
          (-1, -999999999),
      ])
    elif r < 0.31:  # invalid: MessageToDict must fail
      s, n = rng.choice([(mx + 1, 0), (-mx - 1, 0), (1, -1), (-1, 1),
                         (0, 10**9)])
    else:
      s = rng.choice([rng.randint(-mx, mx), rng.randint(-100, 100)])
      n = rng.choice([0, rng.randint(0, 999) * 10**6,
                      rng.randint(0, 999999) * 1000, rng.randint(0, 10**9 - 1)])
      if s < 0 or (s == 0 and rng.random() < 0.5):
        n = -n
    msg.SetInParent()
    msg.seconds = s
    msg.nanos = n

  def _snake_word(self):
    rng = self.rng
    w = rng.choice('abcdefghijklmnopqrstuvwxyz')
    for _ in range(rng.randint(0, 5)):
      w += rng.choice('abcdefghijklmnopqrstuvwxyz0123456789')
    return w

  def fill_field_mask(self, msg, depth=0):
    rng = self.rng
    msg.SetInParent()
    for _ in range(rng.choice([0, 1, 2, 3])):
      segs = []
      for _ in range(rng.randint(1, 3)):
        segs.append('_'.join(self._snake_word()
                             for _ in range(rng.randint(1, 3))))
      msg.paths.append('.'.join(segs))

  def fill_value(self, msg, depth=0, level=0):
    rng = self.rng
    r = rng.random()
    msg.SetInParent()
    if r < 0.02:
      return  # no kind set: renders as null
    if level >= 3:
      r = 0.1 + r * 0.5  # leaves only
    if r < 0.15:
      msg.null_value = 0
    elif r < 0.3:
      msg.bool_value = rng.random() < 0.5
    elif r < 0.45:
      msg.string_value = self.rand_string()
    elif r < 0.6:
      x = rng.random()
      if x < 0.02:
        msg.number_value = rng.choice([NAN, INF, -INF])  # render error
      else:
        v = self.rand_double()
        while math.isnan(v) or math.isinf(v):
          v = self.rand_double()
        msg.number_value = v
    elif r < 0.8:
      self.fill_list_value(msg.list_value, depth, level + 1)
    else:
      self.fill_struct(msg.struct_value, depth, level + 1)

  def fill_list_value(self, msg, depth=0, level=0):
    msg.SetInParent()
    for _ in range(self.rng.choice([0, 1, 2, 3, 4])):
      self.fill_value(msg.values.add(), depth, level)

  def fill_struct(self, msg, depth=0, level=0):
    msg.SetInParent()
    for _ in range(self.rng.choice([0, 1, 2, 3, 4])):
      key = self.rand_string(max_len=6)
      self.fill_value(msg.fields[key], depth, level)

  def fill_any(self, msg, depth=0):
    rng = self.rng
    msg.SetInParent()
    if self.any_depth >= 3:
      payload = self.o.cls('google.protobuf.Empty')()
    else:
      self.any_depth += 1
      kinds = ['top', 'top', 'nested', 'node', 'google.protobuf.Timestamp',
               'google.protobuf.Duration', 'wrapper', 'google.protobuf.Struct',
               'google.protobuf.Value', 'google.protobuf.Empty',
               'google.protobuf.Any', 'google.protobuf.FieldMask',
               'google.protobuf.ListValue']
      kind = rng.choice(kinds)
      if kind == 'top':
        payload = self.o.cls(DEFAULT_MESSAGE if self.o.has_message(
            DEFAULT_MESSAGE) else 'google.protobuf.Empty')()
        saved = self.budget
        self.budget = min(self.budget, 20)
        self.fill(payload, depth + 1, rng.choice([0.05, 0.15, 0.3]))
        self.budget = saved
      elif kind in ('nested', 'node'):
        name = {'nested': 'protogate.test.v1.Nested',
                'node': NODE_MESSAGE}[kind]
        if not self.o.has_message(name):
          name = 'google.protobuf.Empty'
        payload = self.o.cls(name)()
        saved = self.budget
        self.budget = min(self.budget, 6)
        self.fill(payload, depth + 1, 0.5)
        self.budget = saved
      elif kind == 'wrapper':
        payload = self.o.cls(rng.choice(sorted(WRAPPER_TYPES)))()
        self.fill_wrapper(payload)
      else:
        payload = self.o.cls(kind)()
        self.fill(payload, depth + 1, 0.5)
      self.any_depth -= 1
    prefix = 'type.googleapis.com/'
    if rng.random() < 0.05:
      prefix = 'example.com/some/path/'
    msg.Pack(payload, type_url_prefix=prefix, deterministic=True)
    if rng.random() < 0.01:  # unresolvable type: MessageToDict must fail
      msg.type_url = 'type.googleapis.com/protogate.test.v1.DoesNotExist'

  # -- unknown fields ---------------------------------------------------
  def collect_regular(self, msg, path, out):
    """Lists (path, message) of every present non-WKT message."""
    out.append((path, msg))
    prefix = path + '.' if path else ''
    for f, v in msg.ListFields():
      if f.type != FD.TYPE_MESSAGE:
        continue
      if _is_map_field(f):
        vf = f.message_type.fields_by_name['value']
        if vf.type != FD.TYPE_MESSAGE or _is_wkt(vf.message_type):
          continue
        kf = f.message_type.fields_by_name['key']
        for k in sorted(v.keys()):
          if kf.type == FD.TYPE_BOOL:
            ks = 'true' if k else 'false'
          else:
            ks = str(k)
          self.collect_regular(v[k], '%s%s[%s]' % (prefix, f.json_name, ks),
                               out)
      elif _is_wkt(f.message_type):
        continue
      elif _is_repeated(f):
        for i, sub in enumerate(v):
          self.collect_regular(sub, '%s%s[%d]' % (prefix, f.json_name, i), out)
      else:
        self.collect_regular(v, prefix + f.json_name, out)

  def rand_unknown_bytes(self, number):
    rng = self.rng
    wt = rng.choice([0, 1, 2, 5])
    out = _encode_varint((number << 3) | wt)
    if wt == 0:
      out += _encode_varint(rng.choice(
          [0, 1, 300, 2**63, 2**64 - 1, rng.getrandbits(rng.randint(1, 64))]))
    elif wt == 1:
      out += rng.getrandbits(64).to_bytes(8, 'little')
    elif wt == 5:
      out += rng.getrandbits(32).to_bytes(4, 'little')
    else:
      payload = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 12)))
      out += _encode_varint(len(payload)) + payload
    return out

  def inject_unknown(self, msg):
    rng = self.rng
    targets = []
    self.collect_regular(msg, '', targets)
    chosen = [targets[0]]
    rest = targets[1:]
    if rest:
      idx = sorted(rng.sample(range(len(rest)), min(len(rest),
                                                    rng.randint(1, 4))))
      # Prefer reaching the deepest message sometimes.
      if rng.random() < 0.5 and (len(rest) - 1) not in idx:
        idx.append(len(rest) - 1)
      chosen += [rest[i] for i in idx]
    recorded = []
    for path, sub in chosen:
      known = {f.number for f in sub.DESCRIPTOR.fields}
      free = [n for n in UNKNOWN_FIELD_NUMBERS if n not in known]
      for number in rng.sample(free, rng.randint(1, 2)):
        sub.MergeFromString(self.rand_unknown_bytes(number))
        recorded.append([path, number])
    return recorded


# ----------------------------------------------------------------------
# Hand-written parse edge cases.
# ----------------------------------------------------------------------
KS = DEFAULT_MESSAGE
ANY_NESTED = 'type.googleapis.com/protogate.test.v1.Nested'


def _j(obj):
  return json.dumps(obj)


def _node_chain(levels):
  """A Node JSON nested `levels` messages deep (root counts as 1)."""
  return '{"child": ' * (levels - 1) + '{"value": 1}' + '}' * (levels - 1)


def _list_chain(levels):
  return '{"wValue": ' + '[' * levels + ']' * levels + '}'


def edge_cases():
  """Yields (id, message, json_text, ignore_unknown)."""
  cases = []

  def add(case_id, text, message=KS, ignore_unknown=False):
    if not isinstance(text, str):
      text = _j(text)
    cases.append((case_id, message, text, ignore_unknown))

  # --- integers: every type at and beyond its limits ---------------
  int_fields = [
      ('int32', 'fInt32', -2**31, 2**31 - 1),
      ('int64', 'fInt64', -2**63, 2**63 - 1),
      ('uint32', 'fUint32', 0, 2**32 - 1),
      ('uint64', 'fUint64', 0, 2**64 - 1),
      ('sint32', 'fSint32', -2**31, 2**31 - 1),
      ('sint64', 'fSint64', -2**63, 2**63 - 1),
      ('fixed32', 'fFixed32', 0, 2**32 - 1),
      ('fixed64', 'fFixed64', 0, 2**64 - 1),
      ('sfixed32', 'fSfixed32', -2**31, 2**31 - 1),
      ('sfixed64', 'fSfixed64', -2**63, 2**63 - 1),
  ]
  for t, name, lo, hi in int_fields:
    add('edge-%s-max-number' % t, '{"%s": %d}' % (name, hi))
    add('edge-%s-min-string' % t, {name: str(lo)})
    add('edge-%s-above-max-number' % t, '{"%s": %d}' % (name, hi + 1))
    add('edge-%s-above-max-string' % t, {name: str(hi + 1)})
    add('edge-%s-below-min-number' % t, '{"%s": %d}' % (name, lo - 1))
    add('edge-%s-below-min-string' % t, {name: str(lo - 1)})

  add('edge-int32-number', '{"fInt32": 42}')
  add('edge-int32-string', {'fInt32': '42'})
  add('edge-int32-negative-string', {'fInt32': '-42'})
  add('edge-int64-number-beyond-2pow53', '{"fInt64": 9007199254740993}')
  add('edge-int64-string', {'fInt64': '9007199254740993'})
  add('edge-uint64-number-max-in-repeated',
      '{"repUint64": [18446744073709551615, 0]}')
  add('edge-int32-exponent-number', '{"fInt32": 1e3}')
  add('edge-int32-exponent-string', {'fInt32': '1e3'})
  add('edge-int64-string-exponent', {'fInt64': '1e3'})
  add('edge-int64-number-exponent', '{"fInt64": 1e3}')
  add('edge-int64-string-exponent-negative', {'fInt64': '100e-2'})
  add('edge-int64-string-exponent-fraction', {'fInt64': '1e-3'})
  add('edge-int64-number-1e19', '{"fInt64": 1e19}')
  add('edge-uint64-string-1e19', {'fUint64': '1e19'})
  add('edge-int64-number-max-as-float', '{"fInt64": 9223372036854775807.0}')
  add('edge-uint64-string-max-as-float', {'fUint64': '18446744073709551615.0'})
  add('edge-int32-decimal-zero-number', '{"fInt32": 1.0}')
  add('edge-int32-decimal-zero-string', {'fInt32': '1.0'})
  add('edge-int32-fraction-number', '{"fInt32": 1.5}')
  add('edge-int32-fraction-string', {'fInt32': '1.5'})
  add('edge-int32-bool', '{"fInt32": true}')
  add('edge-int32-string-leading-space', {'fInt32': ' 42'})
  add('edge-int32-string-trailing-space', {'fInt32': '42 '})
  add('edge-int32-string-tab', {'fInt32': '\t42'})
  add('edge-int32-string-newline', {'fInt32': '42\n'})
  add('edge-int32-string-underscore', {'fInt32': '1_000'})
  add('edge-int32-string-plus', {'fInt32': '+5'})
  add('edge-int32-string-leading-zero', {'fInt32': '007'})
  add('edge-int32-string-hex', {'fInt32': '0x10'})
  add('edge-int32-string-unicode-digits', {'fInt32': '\uff11\uff12'})
  add('edge-int32-string-infinity', {'fInt32': 'Infinity'})
  add('edge-int32-string-empty', {'fInt32': ''})
  add('edge-int32-number-negative-zero', '{"fInt32": -0}')
  add('edge-uint32-number-negative-zero-float', '{"fUint32": -0.0}')
  add('edge-uint32-string-negative-zero', {'fUint32': '-0'})
  add('edge-int32-array', '{"fInt32": [1]}')
  add('edge-int32-object', '{"fInt32": {}}')
  add('edge-int32-number-leading-zero', '{"fInt32": 01}')
  add('edge-int32-number-plus', '{"fInt32": +1}')

  # --- floating point ---------------------------------------------
  add('edge-float-overflow-number', '{"fFloat": 3.5e38}')
  add('edge-float-overflow-string', {'fFloat': '3.5e38'})
  add('edge-float-max-exact', '{"fFloat": 3.4028234663852886e38}')
  add('edge-float-max-shortest', '{"fFloat": 3.4028235e38}')
  add('edge-float-min-shortest', '{"fFloat": -3.4028235e38}')
  add('edge-float-underflow-to-zero', '{"fFloat": 1e-50}')
  add('edge-float-rounding', '{"fFloat": 0.1}')
  add('edge-float-infinity-string', {'fFloat': 'Infinity'})
  add('edge-float-neg-infinity-string', {'fFloat': '-Infinity'})
  add('edge-float-nan-string', {'fFloat': 'NaN'})
  add('edge-float-nan-lowercase', {'fFloat': 'nan'})
  add('edge-double-infinity-string', {'fDouble': 'Infinity'})
  add('edge-double-neg-infinity-string', {'fDouble': '-Infinity'})
  add('edge-double-nan-string', {'fDouble': 'NaN'})
  add('edge-double-nan-lowercase', {'fDouble': 'nan'})
  add('edge-double-inf-lowercase', {'fDouble': 'inf'})
  add('edge-double-infinity-lowercase', {'fDouble': 'infinity'})
  add('edge-double-neg-inf-short', {'fDouble': '-inf'})
  add('edge-double-nan-token', '{"fDouble": NaN}')
  add('edge-double-infinity-token', '{"fDouble": Infinity}')
  add('edge-double-neg-infinity-token', '{"fDouble": -Infinity}')
  add('edge-double-negative-zero', '{"fDouble": -0.0}')
  add('edge-float-negative-zero', '{"fFloat": -0.0}')
  add('edge-double-min-subnormal', '{"fDouble": 5e-324}')
  add('edge-double-max', '{"fDouble": 1.7976931348623157e308}')
  add('edge-double-overflow-number', '{"fDouble": 1e400}')
  add('edge-double-overflow-string', {'fDouble': '1e400'})
  add('edge-double-string', {'fDouble': '1.5'})
  add('edge-double-string-exponent', {'fDouble': '-2.5E-3'})
  add('edge-double-string-spaces', {'fDouble': '  1.5 '})
  add('edge-double-string-underscore', {'fDouble': '1_0.5'})
  add('edge-double-string-hex', {'fDouble': '0x1p3'})
  add('edge-double-string-empty', {'fDouble': ''})
  add('edge-double-integer-number', '{"fDouble": 3}')
  add('edge-double-bool', '{"fDouble": true}')
  add('edge-repeated-double-specials',
      {'repDouble': ['NaN', 'Infinity', '-Infinity', -0.0, 1]})

  # --- bool ---------------------------------------------------------
  add('edge-bool-true', '{"fBool": true}')
  add('edge-bool-string-true', {'fBool': 'true'})
  add('edge-bool-number-one', '{"fBool": 1}')

  # --- strings ------------------------------------------------------
  add('edge-string-lone-high-surrogate', '{"fString": "\\ud800"}')
  add('edge-string-lone-low-surrogate', '{"fString": "a\\udc00b"}')
  add('edge-string-surrogate-pair', '{"fString": "\\ud83d\\ude00"}')
  add('edge-string-escapes', '{"fString": "\\u0000\\/\\b\\f\\n\\r\\t\\"\\\\"}')
  add('edge-string-raw-control-char', '{"fString": "a\x01b"}')
  add('edge-string-raw-unicode', '{"fString": "\u00e9\u4e2d\U0001f600"}')
  add('edge-string-number', '{"fString": 5}')
  add('edge-string-bool', '{"fString": false}')

  # --- bytes --------------------------------------------------------
  add('edge-bytes-standard', {'fBytes': '+/+/AAEC'})
  add('edge-bytes-standard-padded', {'fBytes': 'AQI='})
  add('edge-bytes-standard-padded-2', {'fBytes': 'AQ=='})
  add('edge-bytes-urlsafe', {'fBytes': '-_-_AAEC'})
  add('edge-bytes-urlsafe-unpadded', {'fBytes': '-_8'})
  add('edge-bytes-unpadded', {'fBytes': 'AQI'})
  add('edge-bytes-unpadded-2', {'fBytes': 'AQ'})
  add('edge-bytes-empty', {'fBytes': ''})
  add('edge-bytes-mixed-alphabets', {'fBytes': '+/-_'})
  add('edge-bytes-extra-padding', {'fBytes': 'AQI=='})
  add('edge-bytes-padding-in-middle', {'fBytes': 'AQ==AQ=='})
  add('edge-bytes-single-char', {'fBytes': 'A'})
  add('edge-bytes-invalid-chars', {'fBytes': '!!!!'})
  add('edge-bytes-with-space', {'fBytes': 'AQ I='})
  add('edge-bytes-with-newline', {'fBytes': 'AQI=\n'})
  add('edge-bytes-non-canonical-trailing-bits', {'fBytes': 'AR=='})
  add('edge-bytes-number', '{"fBytes": 5}')

  # --- enums --------------------------------------------------------
  add('edge-enum-name', {'fEnum': 'COLOR_RED'})
  add('edge-enum-number', '{"fEnum": 2}')
  add('edge-enum-number-string', {'fEnum': '2'})
  add('edge-enum-negative-name', {'fEnum': 'COLOR_NEGATIVE'})
  add('edge-enum-negative-number', '{"fEnum": -5}')
  add('edge-enum-unknown-name', {'fEnum': 'COLOR_PURPLE'})
  add('edge-enum-unknown-number', '{"fEnum": 17}')
  add('edge-enum-unknown-number-string', {'fEnum': '17'})
  add('edge-enum-number-out-of-int32', '{"fEnum": 2147483648}')
  add('edge-enum-lowercase-name', {'fEnum': 'color_red'})
  add('edge-enum-fraction', '{"fEnum": 1.5}')
  add('edge-enum-bool', '{"fEnum": true}')
  add('edge-enum-null', '{"fEnum": null}')
  add('edge-enum-repeated-mixed', {'repEnum': ['COLOR_RED', 2, 17]})
  add('edge-enum-map-value-name', {'mapStringEnum': {'a': 'COLOR_BLUE'}})
  add('edge-enum-optional-zero', {'optEnum': 'COLOR_UNSPECIFIED'})

  # --- field names --------------------------------------------------
  add('edge-json-name-and-proto-name-same-field', '{"fInt32": 1, "f_int32": 2}')
  add('edge-proto-name', '{"f_int32": 7, "foo_bar_baz": "x"}')
  add('edge-custom-json-name', '{"renamedField": 5}')
  add('edge-custom-json-name-by-proto-name', '{"custom_named": 5}')
  add('edge-custom-json-name-default-camel', '{"customNamed": 5}')
  add('edge-custom-json-name-both', '{"renamedField": 5, "custom_named": 6}')
  add('edge-camel-names',
      {'fieldName1': 'a', 'fooBarBaz': 'b', 'aBC': 'c', 'x2y': 'd',
       'field2X': 1, 'trailing': 2})
  add('edge-camel-names-by-proto-name',
      {'field_name_1': 'a', 'foo_bar_baz': 'b', 'a_b_c': 'c', 'x2y': 'd',
       'field_2_x': 1, 'trailing_': 2})
  add('edge-camel-wrong-case', '{"fieldname1": "a"}')
  add('edge-camel-upper-first', '{"FInt32": 1}')

  # --- oneof --------------------------------------------------------
  add('edge-oneof-two-members', '{"oneofUint32": 1, "oneofString": "a"}')
  add('edge-oneof-two-members-proto-names',
      '{"oneof_uint32": 1, "oneof_string": "a"}')
  add('edge-oneof-member-plus-null', '{"oneofUint32": 1, "oneofString": null}')
  add('edge-oneof-null-plus-member', '{"oneofString": null, "oneofUint32": 1}')
  add('edge-oneof-both-null', '{"oneofUint32": null, "oneofString": null}')
  add('edge-oneof-member-plus-value-null',
      '{"oneofUint32": 1, "oneofValue": null}')
  add('edge-oneof-null-value-enum-null', '{"oneofNullValue": null}')
  add('edge-oneof-default-uint32', '{"oneofUint32": 0}')
  add('edge-oneof-default-string', '{"oneofString": ""}')
  add('edge-oneof-default-enum', '{"oneofEnum": "COLOR_UNSPECIFIED"}')
  add('edge-oneof-empty-message', '{"oneofNested": {}}')
  add('edge-oneof-timestamp', '{"oneofTimestamp": "1970-01-01T00:00:00Z"}')
  add('edge-oneof-same-member-twice-names',
      '{"oneofUint32": 1, "oneof_uint32": 2}')

  # --- null ---------------------------------------------------------
  add('edge-null-scalar', '{"fInt32": null}')
  add('edge-null-string', '{"fString": null}')
  add('edge-null-optional', '{"optInt32": null}')
  add('edge-null-message', '{"fNested": null}')
  add('edge-null-repeated', '{"repInt32": null}')
  add('edge-null-map', '{"mapStringString": null}')
  add('edge-null-in-repeated', '{"repInt32": [1, null]}')
  add('edge-null-in-repeated-message', '{"repNested": [null]}')
  add('edge-null-in-repeated-value', '{"repValue": [null, 1]}')
  add('edge-null-in-repeated-wrapper', '{"repInt32Wrapper": [null]}')
  add('edge-null-in-repeated-null-value', '{"repNullValue": [null]}')
  add('edge-null-map-value-scalar', '{"mapStringString": {"a": null}}')
  add('edge-null-map-value-message', '{"mapStringNested": {"a": null}}')
  add('edge-null-map-value-value', '{"mapStringValue": {"a": null}}')
  add('edge-null-map-value-null-value', '{"mapStringNullValue": {"a": null}}')
  add('edge-null-map-value-wrapper', '{"mapStringInt64Wrapper": {"a": null}}')
  add('edge-null-value-field', '{"wValue": null}')
  add('edge-null-null-value-enum', '{"wNullValue": null}')
  add('edge-null-optional-null-value', '{"optNullValue": null}')
  add('edge-null-value-enum-name', '{"wNullValue": "NULL_VALUE"}')
  add('edge-null-value-enum-zero', '{"wNullValue": 0}')
  add('edge-null-wrapper', '{"wInt32": null}')
  add('edge-null-any', '{"wAny": null}')
  add('edge-null-struct', '{"wStruct": null}')
  add('edge-null-list-value', '{"wListValue": null}')
  add('edge-null-timestamp', '{"wTimestamp": null}')
  add('edge-null-root', 'null')

  # --- duplicates ---------------------------------------------------
  add('edge-duplicate-key', '{"fInt32": 1, "fInt32": 2}')
  add('edge-duplicate-key-nested', '{"fNested": {"a": 1, "a": 2}}')
  add('edge-duplicate-map-key', '{"mapStringString": {"a": "x", "a": "y"}}')
  add('edge-duplicate-map-key-equivalent-ints',
      '{"mapInt32Int32": {"1": 1, "01": 2}}')
  add('edge-duplicate-key-escaped', '{"fInt32": 1, "f\\u0049nt32": 2}')
  add('edge-duplicate-struct-key', '{"wStruct": {"a": 1, "a": 2}}')

  # --- unknown keys -------------------------------------------------
  add('edge-unknown-key', '{"nope": 1}')
  add('edge-unknown-key-nested', '{"fNested": {"nope": {"x": [1]}}}')
  add('edge-unknown-key-in-any',
      '{"wAny": {"@type": "%s", "nope": 1}}' % ANY_NESTED)
  add('edge-unknown-extension-key', '{"[foo.bar]": 1}')

  # --- maps ---------------------------------------------------------
  add('edge-map-int32-keys',
      '{"mapInt32Int32": {"-2147483648": 1, "2147483647": 2, "0": 0}}')
  add('edge-map-int64-keys',
      '{"mapInt64Int64": {"-9223372036854775808": "1", '
      '"9223372036854775807": 2}}')
  add('edge-map-uint32-keys', '{"mapUint32Uint32": {"4294967295": 1, "0": 2}}')
  add('edge-map-uint64-keys',
      '{"mapUint64Uint64": {"18446744073709551615": "18446744073709551615"}}')
  add('edge-map-sint32-keys', '{"mapSint32Sint32": {"-2147483648": -1}}')
  add('edge-map-sint64-keys',
      '{"mapSint64Sint64": {"-9223372036854775808": "-1"}}')
  add('edge-map-fixed32-keys', '{"mapFixed32Fixed32": {"4294967295": 1}}')
  add('edge-map-fixed64-keys',
      '{"mapFixed64Fixed64": {"18446744073709551615": "1"}}')
  add('edge-map-sfixed32-keys', '{"mapSfixed32Sfixed32": {"-2147483648": 1}}')
  add('edge-map-sfixed64-keys',
      '{"mapSfixed64Sfixed64": {"-9223372036854775808": "1"}}')
  add('edge-map-bool-keys', '{"mapBoolBool": {"true": true, "false": false}}')
  add('edge-map-bool-key-uppercase', '{"mapBoolBool": {"True": true}}')
  add('edge-map-bool-key-number', '{"mapBoolBool": {"1": true}}')
  add('edge-map-string-keys-empty-and-unicode',
      '{"mapStringString": {"": "", "\\u00e9\\ud83d\\ude00": "x"}}')
  add('edge-map-int-key-bad', '{"mapInt32Int32": {"x": 1}}')
  add('edge-map-int-key-out-of-range', '{"mapInt32Int32": {"2147483648": 1}}')
  add('edge-map-uint32-key-negative', '{"mapUint32Uint32": {"-1": 1}}')
  add('edge-map-int-key-exponent', '{"mapInt32Int32": {"1e2": 1}}')
  add('edge-map-int-key-space', '{"mapInt32Int32": {" 1": 1}}')
  add('edge-map-int-key-float', '{"mapInt64Int64": {"1.0": "1"}}')
  add('edge-map-wrong-type-array', '{"mapStringString": []}')
  add('edge-map-value-wrong-type', '{"mapInt32Int32": {"1": "x"}}')
  add('edge-map-value-int-as-string', '{"mapInt64Int64": {"1": "5"}}')
  add('edge-map-message-values',
      '{"mapStringNested": {"k": {"a": 1, "ids": ["1", 2]}}, '
      '"mapInt64Node": {"-1": {"value": 3, "byName": {"x": {}}}}}')
  add('edge-map-wkt-values',
      '{"mapStringTimestamp": {"t": "2000-01-01T00:00:00Z"}, '
      '"mapStringDuration": {"d": "-1.5s"}, '
      '"mapStringAny": {"a": {"@type": "%s", "a": 1}}, '
      '"mapStringInt64Wrapper": {"w": "12"}, "mapStringEmpty": {"e": {}}, '
      '"mapStringStruct": {"s": {"x": [1, null]}}, '
      '"mapStringListValue": {"l": [true]}}' % ANY_NESTED)

  # --- wrong JSON types --------------------------------------------
  add('edge-wrong-type-string-for-bool', '{"fBool": "yes"}')
  add('edge-wrong-type-object-for-repeated', '{"repInt32": {}}')
  add('edge-wrong-type-scalar-for-repeated', '{"repInt32": 1}')
  add('edge-wrong-type-array-for-message', '{"fNested": [1]}')
  add('edge-wrong-type-empty-array-for-message', '{"fNested": []}')
  add('edge-wrong-type-string-for-message', '{"fNested": "abc"}')
  add('edge-wrong-type-number-for-message', '{"fNested": 1}')
  add('edge-root-empty-array', '[]')
  add('edge-root-string', '"x"')
  add('edge-root-empty-object', '{}')

  # --- Timestamp ----------------------------------------------------
  ts = lambda v: {'wTimestamp': v}
  add('edge-timestamp-z', ts('1972-01-01T10:00:20.021Z'))
  add('edge-timestamp-offset-plus', ts('1972-01-01T10:00:20+01:00'))
  add('edge-timestamp-offset-minus', ts('1972-01-01T10:00:20-05:30'))
  add('edge-timestamp-offset-zero', ts('1972-01-01T10:00:20+00:00'))
  add('edge-timestamp-fraction-0', ts('2017-01-15T01:30:15Z'))
  add('edge-timestamp-fraction-1', ts('2017-01-15T01:30:15.5Z'))
  add('edge-timestamp-fraction-3', ts('2017-01-15T01:30:15.010Z'))
  add('edge-timestamp-fraction-6', ts('2017-01-15T01:30:15.000010Z'))
  add('edge-timestamp-fraction-9', ts('2017-01-15T01:30:15.000000001Z'))
  add('edge-timestamp-fraction-10', ts('2017-01-15T01:30:15.0000000001Z'))
  add('edge-timestamp-fraction-empty', ts('2017-01-15T01:30:15.Z'))
  add('edge-timestamp-lowercase-t', ts('2017-01-15t01:30:15Z'))
  add('edge-timestamp-lowercase-z', ts('2017-01-15T01:30:15z'))
  add('edge-timestamp-space-separator', ts('2017-01-15 01:30:15Z'))
  add('edge-timestamp-min', ts('0001-01-01T00:00:00Z'))
  add('edge-timestamp-max', ts('9999-12-31T23:59:59.999999999Z'))
  add('edge-timestamp-year-10000', ts('10000-01-01T00:00:00Z'))
  add('edge-timestamp-below-min-via-offset', ts('0001-01-01T00:00:00+01:00'))
  add('edge-timestamp-above-max-via-offset', ts('9999-12-31T23:59:59-01:00'))
  add('edge-timestamp-no-offset', ts('2017-01-15T01:30:15'))
  add('edge-timestamp-offset-no-colon', ts('2017-01-15T01:30:15+0100'))
  add('edge-timestamp-offset-out-of-range', ts('2017-01-15T01:30:15+99:99'))
  add('edge-timestamp-single-digit-fields', ts('2017-1-5T1:2:3Z'))
  add('edge-timestamp-leap-second', ts('1972-06-30T23:59:60Z'))
  add('edge-timestamp-feb-30', ts('2017-02-30T00:00:00Z'))
  add('edge-timestamp-number', '{"wTimestamp": 0}')
  add('edge-timestamp-object', '{"wTimestamp": {"seconds": 1}}')
  add('edge-timestamp-trailing-data', ts('2017-01-15T01:30:15Zjunk'))

  # --- Duration -----------------------------------------------------
  du = lambda v: {'wDuration': v}
  add('edge-duration-fraction', du('1.5s'))
  add('edge-duration-negative-fraction', du('-0.5s'))
  add('edge-duration-whole', du('1s'))
  add('edge-duration-zero', du('0s'))
  add('edge-duration-max', du('315576000000.999999999s'))
  add('edge-duration-min', du('-315576000000.999999999s'))
  add('edge-duration-above-max', du('315576000001s'))
  add('edge-duration-no-unit', du('1'))
  add('edge-duration-fraction-10-digits', du('1.0000000001s'))
  add('edge-duration-nanos', du('0.000000001s'))
  add('edge-duration-plus-sign', du('+1s'))
  add('edge-duration-space', du('1 s'))
  add('edge-duration-exponent', du('1e3s'))
  add('edge-duration-leading-dot', du('.5s'))
  add('edge-duration-trailing-dot', du('1.s'))
  add('edge-duration-underscore', du('1_0s'))
  add('edge-duration-uppercase-unit', du('1S'))
  add('edge-duration-number', '{"wDuration": 1}')

  # --- FieldMask ----------------------------------------------------
  add('edge-field-mask-camel', {'wFieldMask': 'fooBar,baz.quxQuux'})
  add('edge-field-mask-underscore', {'wFieldMask': 'foo_bar'})
  add('edge-field-mask-empty', {'wFieldMask': ''})
  add('edge-field-mask-leading-upper', {'wFieldMask': 'FooBar'})
  add('edge-field-mask-empty-segment', {'wFieldMask': 'a,,b'})
  add('edge-field-mask-number', '{"wFieldMask": 1}')
  add('edge-field-mask-array', '{"wFieldMask": ["fooBar"]}')

  # --- Struct / Value / ListValue ------------------------------------
  add('edge-struct-nested',
      '{"wStruct": {"a": {"b": [1, "two", null, true, {"c": []}]}, "": {}}}')
  add('edge-struct-not-object', '{"wStruct": []}')
  add('edge-value-number', '{"wValue": 1.5}')
  add('edge-value-string', '{"wValue": "s"}')
  add('edge-value-bool', '{"wValue": false}')
  add('edge-value-list', '{"wValue": [1, [2, [3]], {"x": null}]}')
  add('edge-value-object', '{"wValue": {"k": {"k": "v"}}}')
  add('edge-value-nan-token', '{"wValue": NaN}')
  add('edge-value-infinity-token', '{"wValue": Infinity}')
  add('edge-value-overflow-number', '{"wValue": 1e400}')
  add('edge-value-huge-integer', '{"wValue": 1%s}' % ('0' * 400))
  add('edge-value-big-integer', '{"wValue": 18446744073709551617}')
  add('edge-value-nan-string', {'wValue': 'NaN'})
  add('edge-list-value-not-array', '{"wListValue": {}}')
  add('edge-list-value-nested', '{"wListValue": [[], [null], {}]}')
  add('edge-repeated-struct', '{"repStruct": [{}, {"a": 1}]}')
  add('edge-repeated-list-value', '{"repListValue": [[], [1]]}')

  # --- wrappers -----------------------------------------------------
  add('edge-wrappers-bare',
      {'wDouble': 1.5, 'wFloat': 'Infinity', 'wInt64': '-9223372036854775808',
       'wUint64': '18446744073709551615', 'wInt32': 5, 'wUint32': 0,
       'wBool': False, 'wString': '', 'wBytes': 'AQI='})
  add('edge-wrapper-int64-number', '{"wInt64": 5}')
  add('edge-wrapper-object-form', '{"wInt32": {"value": 5}}')
  add('edge-wrapper-double-nan', {'wDouble': 'NaN'})
  add('edge-wrapper-uint32-negative', '{"wUint32": -1}')
  add('edge-repeated-wrappers',
      '{"repInt64Wrapper": ["1", 2], "repBoolWrapper": [true, false], '
      '"repStringWrapper": ["", "x"], "repBytesWrapper": ["", "AA=="]}')

  # --- Any ----------------------------------------------------------
  add('edge-any-regular',
      '{"wAny": {"@type": "%s", "a": 1, "b": "x"}}' % ANY_NESTED)
  add('edge-any-regular-type-not-first',
      '{"wAny": {"a": 1, "@type": "%s"}}' % ANY_NESTED)
  add('edge-any-regular-empty', '{"wAny": {"@type": "%s"}}' % ANY_NESTED)
  add('edge-any-kitchen-sink',
      '{"wAny": {"@type": "type.googleapis.com/protogate.test.v1.KitchenSink", '
      '"fInt64": "5", "wTimestamp": "2000-01-01T00:00:00Z", '
      '"mapStringString": {"a": "b"}}}')
  add('edge-any-timestamp',
      '{"wAny": {"@type": "type.googleapis.com/google.protobuf.Timestamp", '
      '"value": "1970-01-01T00:00:01Z"}}')
  add('edge-any-timestamp-missing-value',
      '{"wAny": {"@type": "type.googleapis.com/google.protobuf.Timestamp"}}')
  add('edge-any-duration-extra-key',
      '{"wAny": {"@type": "type.googleapis.com/google.protobuf.Duration", '
      '"value": "1s", "extra": 1}}')
  add('edge-any-wrapper',
      '{"wAny": {"@type": "type.googleapis.com/google.protobuf.Int32Value", '
      '"value": 5}}')
  add('edge-any-struct',
      '{"wAny": {"@type": "type.googleapis.com/google.protobuf.Struct", '
      '"value": {"a": [1, null]}}}')
  add('edge-any-value-null',
      '{"wAny": {"@type": "type.googleapis.com/google.protobuf.Value", '
      '"value": null}}')
  add('edge-any-empty-payload',
      '{"wAny": {"@type": "type.googleapis.com/google.protobuf.Empty"}}')
  add('edge-any-empty-payload-with-value-key',
      '{"wAny": {"@type": "type.googleapis.com/google.protobuf.Empty", '
      '"value": {}}}')
  add('edge-any-nested-any',
      '{"wAny": {"@type": "type.googleapis.com/google.protobuf.Any", '
      '"value": {"@type": "%s", "a": 2}}}' % ANY_NESTED)
  add('edge-any-missing-type', '{"wAny": {"a": 1}}')
  add('edge-any-unknown-type',
      '{"wAny": {"@type": "type.googleapis.com/foo.Bar", "a": 1}}')
  add('edge-any-empty-object', '{"wAny": {}}')
  add('edge-any-type-url-no-slash',
      '{"wAny": {"@type": "protogate.test.v1.Nested", "a": 1}}')
  add('edge-any-type-url-custom-host',
      '{"wAny": {"@type": "example.com/x/y/protogate.test.v1.Nested", "a": 1}}')
  add('edge-any-regular-with-value-key',
      '{"wAny": {"@type": "%s", "value": {"a": 1}}}' % ANY_NESTED)
  add('edge-any-type-null', '{"wAny": {"@type": null}}')
  add('edge-any-not-object', '{"wAny": "x"}')
  add('edge-repeated-any',
      '{"repAny": [{}, {"@type": "type.googleapis.com/google.protobuf.'
      'BoolValue", "value": true}]}')

  # --- depth (max_recursion_depth=100) ------------------------------
  for levels in (99, 100, 101):
    add('edge-depth-node-%d' % levels, _node_chain(levels), message=NODE_MESSAGE)
  for levels in (99, 100, 101):
    add('edge-depth-kitchen-sink-node-%d' % levels,
        '{"node": %s}' % _node_chain(levels - 1))
  for levels in (48, 49, 50):
    add('edge-depth-value-list-%d' % levels, _list_chain(levels))
  for wrappers in (98, 99):
    # KitchenSink(1) > wAny(2) > `wrappers` nested Any values; the innermost
    # value is {} (an empty Any): depth 2 + wrappers.
    add('edge-depth-any-nested-%d' % wrappers,
        '{"wAny": ' + '{"@type": "type.googleapis.com/google.protobuf.Any", '
        '"value": ' * wrappers + '{}' + '}' * wrappers + '}')

  # --- invalid JSON text --------------------------------------------
  add('edge-invalid-json-trailing-comma', '{"fInt32": 1,}')
  add('edge-invalid-json-single-quotes', "{'fInt32': 1}")
  add('edge-invalid-json-unquoted-key', '{fInt32: 1}')
  add('edge-invalid-json-comment', '{"fInt32": 1 /* c */}')
  add('edge-invalid-json-trailing-garbage', '{} x')
  add('edge-invalid-json-two-values', '{} {}')
  add('edge-invalid-json-empty', '')
  add('edge-invalid-json-bom', '\ufeff{}')
  add('edge-invalid-json-bad-escape', '{"fString": "\\x41"}')
  add('edge-invalid-json-truncated', '{"fInt32": 1')
  add('edge-whitespace-around', ' \t\n{ "fInt32" : 1 }\r\n ')

  # --- ignore_unknown_fields=True -----------------------------------
  add('edge-ignore-unknown-key', '{"nope": 1, "fInt32": 3}',
      ignore_unknown=True)
  add('edge-ignore-unknown-key-nested',
      '{"fNested": {"nope": {"x": [1]}, "a": 2}}', ignore_unknown=True)
  add('edge-ignore-unknown-key-in-any',
      '{"wAny": {"@type": "%s", "nope": 1, "a": 4}}' % ANY_NESTED,
      ignore_unknown=True)
  add('edge-ignore-unknown-key-in-map-value',
      '{"mapStringNested": {"k": {"nope": null}}}', ignore_unknown=True)
  add('edge-ignore-unknown-enum-name', {'fEnum': 'COLOR_PURPLE', 'fInt32': 1},
      ignore_unknown=True)
  add('edge-ignore-unknown-enum-in-repeated',
      {'repEnum': ['COLOR_RED', 'COLOR_PURPLE', 'COLOR_BLUE']},
      ignore_unknown=True)
  add('edge-ignore-unknown-enum-in-map', {'mapStringEnum': {'a': 'NOPE'}},
      ignore_unknown=True)
  add('edge-ignore-unknown-extension-key', '{"[foo.bar]": 1}',
      ignore_unknown=True)
  add('edge-ignore-unknown-known-field-bad-value', '{"fInt32": "x"}',
      ignore_unknown=True)
  add('edge-ignore-unknown-any-unknown-type',
      '{"wAny": {"@type": "type.googleapis.com/foo.Bar"}}',
      ignore_unknown=True)
  add('edge-ignore-unknown-duplicate-key', '{"nope": 1, "nope": 2}',
      ignore_unknown=True)
  return cases


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  ap.add_argument('--descriptor-set', required=True,
                  help='binary FileDescriptorSet built with --include_imports')
  ap.add_argument('--seed', type=int, default=0)
  ap.add_argument('--count', type=int, default=100,
                  help='number of random messages')
  ap.add_argument('--message', default=DEFAULT_MESSAGE,
                  help='full name of the top-level message for random cases')
  ap.add_argument('--no-edges', action='store_true',
                  help='omit the hand-written parse edge cases')
  args = ap.parse_args(argv)

  pool, proto3_optional = load_pool(args.descriptor_set)
  oracle = Oracle(pool, proto3_optional)
  out = sys.stdout

  def emit(case):
    out.write(json.dumps(case, ensure_ascii=True, allow_nan=False))
    out.write('\n')

  if not args.no_edges and oracle.has_message(DEFAULT_MESSAGE) and \
      oracle.has_message(NODE_MESSAGE):
    seen = set()
    for case_id, message, text, ignore in edge_cases():
      assert case_id not in seen, case_id
      seen.add(case_id)
      emit(oracle.parse_case(case_id, message, text, ignore_unknown=ignore))

  rng = random.Random(args.seed)
  gen = Generator(oracle, rng)
  desc = pool.FindMessageTypeByName(args.message)
  for i in range(args.count):
    case_id = 'rand-%d' % i
    msg = gen.top(args.message)
    unknown = gen.inject_unknown(msg) if rng.random() < 0.15 else []
    case = oracle.render_case(case_id, msg, unknown)
    emit(case)
    if 'render_error' in case:
      continue
    for suffix, key in (('json', 'dict'), ('json-proto-names',
                                           'dict_proto_names')):
      # Same text as json_format.MessageToJson(msg, indent=None[,
      # preserving_proto_field_name=True]) up to map-key order.
      text = json.dumps(case[key], indent=None, ensure_ascii=True)
      emit(oracle.parse_case('%s-%s' % (case_id, suffix), desc.full_name,
                             text))
  out.flush()


if __name__ == '__main__':
  main()
