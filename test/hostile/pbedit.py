"""Edits of protobuf wire format, for the hostile corpus (standard library only).

A path names a field by number and occurrence from the top message down:
`6[0].5` is field 5 of the first field-6 submessage (NodePlan 0's `num` in a
plan.pb). Operations on the last step:
  set V       the varint V (negative: two's complement, as int32/int64 write it)
  packed [..] a packed repeated varint field (shapes, device lists)
  str S       a length-delimited string or bytes
  del _       drop the occurrence the path names (the value is ignored)
  add V       append another varint occurrence of the field
  addstr S    append another string occurrence
A missing field is created by set, packed and str.
"""


def _varint(buf, i):
    shift = value = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def varint(v):
    if v < 0:
        v += 1 << 64
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def decode(buf):
    """[field, wiretype, value] of one message level (value: int or bytes)."""
    fields = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        fn, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 1:
            v, i = bytes(buf[i:i + 8]), i + 8
        elif wt == 5:
            v, i = bytes(buf[i:i + 4]), i + 4
        elif wt == 2:
            n, i = _varint(buf, i)
            v, i = bytes(buf[i:i + n]), i + n
        else:
            raise ValueError(f"unsupported wire type {wt}")
        fields.append([fn, wt, v])
    return fields


def encode(fields):
    out = bytearray()
    for fn, wt, v in fields:
        out += varint(fn << 3 | wt)
        if wt == 0:
            out += varint(v)
        elif wt == 2:
            out += varint(len(v)) + v
        else:
            out += v
    return bytes(out)


def _step(step):
    if "[" in step:
        f, idx = step[:-1].split("[")
        return int(f), int(idx)
    return int(step), 0


def _as_bytes(value):
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def edit(buf, path, op, value=None):
    steps = path.split(".")
    fields = decode(buf)
    fn, idx = _step(steps[0])
    matches = [f for f in fields if f[0] == fn]
    if len(steps) > 1:
        sub = matches[idx]
        sub[2] = edit(sub[2], ".".join(steps[1:]), op, value)
        return encode(fields)
    if op == "add":
        fields.append([fn, 0, value])
    elif op == "addstr":
        fields.append([fn, 2, _as_bytes(value)])
    elif op == "del":
        fields.remove(matches[idx])
    elif op in ("set", "packed", "str"):
        if op == "set":
            new = [fn, 0, value]
        elif op == "packed":
            new = [fn, 2, b"".join(varint(x) for x in value)]
        else:
            new = [fn, 2, _as_bytes(value)]
        if matches:
            matches[idx][1:] = new[1:]
        else:
            fields.append(new)
    else:
        raise ValueError(f"unknown protobuf edit '{op}'")
    return encode(fields)
