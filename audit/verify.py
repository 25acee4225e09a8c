#!/usr/bin/env python3
"""Independent verifier for fsgate audit logs, written from audit/FORMAT.md.

Usage: verify.py [--json] [--pubkey KEY] [--checkpoint FILE]... [--trusted STATE] FILE|DIR...
       verify.py --check-proof PROOF --pubkey KEY

Exit codes: 0 intact (valid), 1 tampered (invalid), 2 unreadable (or bad arguments).
Needs only the Python 3 standard library, plus the `cryptography` package when a
signature has to be checked.
"""

import argparse
import base64
import binascii
import hashlib
import json
import os
import re
import sys
import time

GENESIS = "0" * 64
TS_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
HEX64 = re.compile(r"[0-9a-f]{64}")
HEX32 = re.compile(r"[0-9a-f]{32}")
U64_MAX = 2**64 - 1
I64_MIN = -(2**63)
MAX_DEPTH = 32
# Section 2, long strings: kept whole up to CUT_WHOLE bytes; a cut one keeps CUT_HEAD.
CUT_WHOLE = 4096
CUT_HEAD = 256

# Section 2: the record fields, in order, with their types.
FIELDS = [
    ("seq", "u64"), ("ts", "str"), ("log", "str"), ("kind", "str"), ("session", "str"),
    ("transport", "str"), ("peer", "str"), ("op", "str"), ("path", "str"),
    ("path2", "str"), ("args", "obj"), ("decision", "str"), ("rule", "str"),
    ("reason", "str"), ("outcome", "str"), ("bytes", "u64"), ("sha256", "str"),
    ("backup", "str"), ("policy_sha256", "str"), ("duration_us", "u64"),
    ("details", "obj"), ("prev", "str"), ("hash", "str"),
]
FIELD_NAMES = {name for name, _ in FIELDS}
REQUIRED = {"seq", "ts", "kind", "prev", "hash"}
CHECKPOINT_NAMES = {"type", "v", "log", "seq", "hash", "ts", "kind", "key", "sig",
                    "root", "frontier", "note"}
TOMBSTONE_NAMES = {"type", "v", "log", "first_seq", "last_seq", "last_hash", "ts",
                   "before", "files", "key", "sig"}
# Rust's str::trim / char::is_whitespace (Unicode White_Space).
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(
    chr(c) for c in range(0x2000, 0x200B)) + "\u2028\u2029\u202f\u205f\u3000"


class NotCanonical(Exception):
    pass


# ---- Section 3: canonical encoding ----------------------------------------------------

SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
         "\r": "\\r"}


def enc_str(s):
    out = ['"']
    for ch in s:
        if ch in SHORT:
            out.append(SHORT[ch])
        elif ord(ch) < 0x20:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def enc_value(v, depth):
    if depth > MAX_DEPTH:
        raise NotCanonical("nested too deeply")
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if type(v) is int:
        if not I64_MIN <= v <= U64_MAX:
            raise NotCanonical("integer out of range")
        return str(v)
    if type(v) is str:
        return enc_str(v)
    if type(v) is list:
        return "[" + ",".join(enc_value(x, depth + 1) for x in v) + "]"
    if type(v) is dict:
        items = sorted(v.items(), key=lambda kv: kv[0].encode("utf-8"))
        return "{" + ",".join(enc_str(k) + ":" + enc_value(x, depth + 1) for k, x in items) + "}"
    raise NotCanonical("not an integer (floats are not canonical)")


def enc_sidecar(obj):
    """Checkpoints and tombstones: sorted names, values as in section 3 (no depth limit
    in practice: their values are flat)."""
    return enc_value(obj, 0).encode("utf-8")


def no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise NotCanonical("repeated name")
        d[k] = v
    return d


# ---- Section 2-4: one record line -------------------------------------------------------

class Info:
    __slots__ = ("seq", "prev", "hash", "ts", "log", "kind", "rec")


def check_line(line):
    """Returns ("ok", Info) | ("malformed", message) | ("modified", seq)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return "malformed", "not UTF-8"
    try:
        rec = json.loads(text, object_pairs_hook=no_duplicates)
    except (ValueError, NotCanonical, RecursionError) as e:
        return "malformed", "not JSON: %s" % e
    if type(rec) is not dict:
        return "malformed", "not an object"
    if not set(rec) <= FIELD_NAMES or not REQUIRED <= set(rec):
        return "malformed", "unknown or missing field"
    parts = []
    try:
        for name, ty in FIELDS:
            if name not in rec:
                continue
            v = rec[name]
            if ty == "u64":
                if type(v) is not int or not 0 <= v <= U64_MAX:
                    return "malformed", "%s is not a u64" % name
                parts.append('"%s":%d' % (name, v))
            elif ty == "str":
                if type(v) is not str:
                    return "malformed", "%s is not a string" % name
                parts.append('"%s":%s' % (name, enc_str(v)))
            else:
                if type(v) is not dict:
                    return "malformed", "%s is not an object" % name
                parts.append('"%s":%s' % (name, enc_value(v, 0)))
        canonical = ("{" + ",".join(parts) + "}").encode("utf-8")
    except (NotCanonical, UnicodeEncodeError) as e:
        return "malformed", "not canonical: %s" % e
    if canonical != line:
        return "malformed", "not in canonical form"
    if not TS_RE.fullmatch(rec["ts"]):
        return "malformed", "bad ts"
    if not HEX64.fullmatch(rec["prev"]) or not HEX64.fullmatch(rec["hash"]):
        return "malformed", "prev/hash not 64 hex digits"
    if "log" in rec and not HEX32.fullmatch(rec["log"]):
        return "malformed", "log not 32 hex digits"
    if rec["seq"] == 0:
        return "malformed", "seq 0"
    if rec["prev"] == GENESIS and (rec["seq"] != 1 or "log" not in rec):
        return "malformed", "genesis prev on a record that is not seq 1 with a log id"
    problem = check_cuts(rec)
    if problem:
        return "malformed", problem
    c = line[: line.rindex(b',"hash":')] + b"}"
    digest = hashlib.sha256(bytes.fromhex(rec["prev"]) + c).hexdigest()
    if digest != rec["hash"]:
        return "modified", rec["seq"]
    info = Info()
    info.seq, info.prev, info.hash, info.ts = rec["seq"], rec["prev"], rec["hash"], rec["ts"]
    info.log = rec.get("log")
    info.kind = rec["kind"] if rec["kind"] in ("break", "recovered") else None
    info.rec = rec
    return "ok", info


def pointer(doc, ptr):
    """RFC 6901: the value `ptr` names in `doc`, or None."""
    if not ptr.startswith("/"):
        return None
    target = doc
    for token in ptr.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if type(target) is dict:
            if token not in target:
                return None
            target = target[token]
        elif type(target) is list:
            if not re.fullmatch(r"0|[1-9][0-9]*", token) or int(token) >= len(target):
                return None
            target = target[int(token)]
        else:
            return None
    return target


def written_len(s):
    """Section 2: the bytes a string takes in a line between its quotes, escapes included."""
    return len(json.dumps(s, ensure_ascii=False).encode("utf-8")) - 2


def check_cuts(rec):
    """Section 2, long strings: `details.cut` as fsgate writes it; a message if not."""
    details = rec.get("details")
    if type(details) is not dict or "cut" not in details:
        return None
    cut = details["cut"]
    if type(cut) is not dict:
        return "details.cut is not an object"
    for ptr, entry in cut.items():
        kept = pointer(rec, ptr)
        if type(kept) is not str:
            return "details.cut names no string: %r" % ptr[:80]
        if written_len(kept) > CUT_HEAD:
            return "details.cut names a string of more than %d bytes" % CUT_HEAD
        if type(entry) is not dict or set(entry) != {"bytes", "sha256"}:
            return "details.cut entry is not {bytes, sha256}"
        n = entry["bytes"]
        if type(n) is not int or not CUT_WHOLE < n <= U64_MAX:
            return "details.cut bytes is not a length over %d" % CUT_WHOLE
        if type(entry["sha256"]) is not str or not HEX64.fullmatch(entry["sha256"]):
            return "details.cut sha256 is not 64 hex digits"
    return None


# ---- Sections 6-7: signed sidecar objects -----------------------------------------------

def load_public_key(arg):
    arg = arg.strip()
    if re.fullmatch(r"[0-9a-fA-F]{64}", arg):
        return bytes.fromhex(arg)
    with open(arg, "rb") as f:
        data = f.read()
    text = data.decode("utf-8", "replace").strip()
    if text.startswith("-----BEGIN"):
        from cryptography.hazmat.primitives import serialization
        key = serialization.load_pem_public_key(text.encode())
        return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return bytes.fromhex(text)


def ed25519_ok(key_raw, msg, sig_hex):
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        from cryptography.exceptions import InvalidSignature
    except ImportError:
        raise SystemExit("verify.py: install the `cryptography` package to check signatures")
    if not re.fullmatch(r"[0-9a-f]{128}", sig_hex):
        return False
    try:
        Ed25519PublicKey.from_public_bytes(key_raw).verify(bytes.fromhex(sig_hex), msg)
        return True
    except (InvalidSignature, ValueError):
        return False


def signature_status(obj, pinned):
    """("unsigned"|"pinned"|"unpinned"|"invalid", message)."""
    sig = obj.get("sig")
    key = obj.get("key")
    if type(sig) is not str:
        return ("invalid", "not signed, but a public key was given") if pinned else ("unsigned", "")
    if type(key) is not str:
        return "invalid", "signature without a key"
    if not HEX64.fullmatch(key):
        return "invalid", "the key it names is not an Ed25519 public key"
    named = bytes.fromhex(key)
    if pinned is not None and pinned != named:
        return "invalid", "signed by another key (%s)" % key
    unsigned = {k: v for k, v in obj.items() if k != "sig"}
    try:
        msg = enc_sidecar(unsigned)
    except NotCanonical:
        return "invalid", "cannot encode"
    if not ed25519_ok(named, msg, sig):
        return "invalid", "signature does not match"
    return ("pinned" if pinned is not None else "unpinned"), ""


def is_u64(v):
    return type(v) is int and 0 <= v <= U64_MAX


def parse_sidecar(line, names, type_name):
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise NotCanonical("not JSON: %s" % e)
    if type(obj) is not dict:
        raise NotCanonical("not an object")
    for k in obj:
        if k not in names:
            raise NotCanonical("unknown field %s" % k)
    if obj.get("type") != type_name or not (type(obj.get("v")) is int and obj["v"] == 1):
        raise NotCanonical("not a version 1 %s" % type_name)
    return obj


def parse_checkpoint(line):
    obj = parse_sidecar(line, CHECKPOINT_NAMES, "checkpoint")
    if not is_u64(obj.get("seq")):
        raise NotCanonical("seq missing")
    if type(obj.get("hash")) is not str or not HEX64.fullmatch(obj["hash"]):
        raise NotCanonical("hash is not 64 lowercase hex digits")
    for k in ("log", "ts", "kind"):
        if type(obj.get(k)) is not str:
            raise NotCanonical("%s missing" % k)
    check_checkpoint_tree(obj)
    return obj


# ---- Section 6a: the Merkle tree, signed notes and proofs ---------------------------------

def leaf_hash(line):
    return hashlib.sha256(b"\x00" + line).digest()


def node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


class Tree:
    """The border of the tree over records 1..size: one root per set bit of size."""

    def __init__(self):
        self.size, self.nodes = 0, []

    def push(self, leaf):
        node, carry = leaf, self.size
        while carry & 1:
            node = node_hash(self.nodes.pop(), node)
            carry >>= 1
        self.nodes.append(node)
        self.size += 1

    def root(self):
        return fold_border(self.nodes)


def fold_border(nodes):
    if not nodes:
        return hashlib.sha256(b"").digest()
    r = nodes[-1]
    for left in reversed(nodes[:-1]):
        r = node_hash(left, r)
    return r


def note_key_id(name, key_raw):
    return hashlib.sha256(name.encode() + b"\n\x01" + key_raw).digest()[:4]


def b64_hash(text):
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == 32 else None


def parse_note(note):
    """(origin, size, root bytes, text, [(name, key id, sig bytes)]) or raise NotCanonical."""
    if "\n\n" not in note:
        raise NotCanonical("note: no blank line before the signatures")
    text, sigs = note.split("\n\n", 1)
    text += "\n"
    lines = text.split("\n")
    if len(lines) < 4 or not lines[0]:
        raise NotCanonical("note: fewer than three lines")
    origin, size, root = lines[0], lines[1], b64_hash(lines[2])
    if not re.fullmatch(r"0|[1-9][0-9]*", size) or root is None:
        raise NotCanonical("note: bad tree size or root hash")
    parsed = []
    for line in sigs.split("\n"):
        if not line:
            continue
        if not line.startswith("\u2014 ") or " " not in line[2:]:
            raise NotCanonical("note: bad signature line")
        name, blob = line[2:].rsplit(" ", 1)
        try:
            blob = base64.b64decode(blob, validate=True)
        except (binascii.Error, ValueError):
            raise NotCanonical("note: a signature is not base64")
        if len(blob) == 68:
            parsed.append((name, blob[:4], blob[4:]))
    return origin, int(size), root, text, parsed


def note_signed_by(note, key_raw):
    origin, _, _, text, sigs = note
    kid = note_key_id(origin, key_raw)
    return any(name == origin and k == kid and ed25519_ok(key_raw, text.encode(), s.hex())
               for name, k, s in sigs)


def check_checkpoint_tree(obj):
    present = [k in obj for k in ("root", "frontier", "note")]
    if not any(present):
        return
    if not all(present):
        raise NotCanonical("root, frontier and note must all be present")
    fr = obj["frontier"]
    if (type(fr) is not list or not all(type(h) is str and HEX64.fullmatch(h) for h in fr)
            or len(fr) != bin(obj["seq"]).count("1")):
        raise NotCanonical("frontier is not one hash per set bit of seq")
    root = fold_border([bytes.fromhex(h) for h in fr])
    if obj["root"] != root.hex():
        raise NotCanonical("root is not the root of the frontier")
    if type(obj["note"]) is not str:
        raise NotCanonical("note is not a string")
    note = parse_note(obj["note"])
    if note[:3] != ("fsgate.audit/" + obj["log"], obj["seq"], root):
        raise NotCanonical("the note does not state this log, seq and root")
    key = obj.get("key")
    if type(key) is str and HEX64.fullmatch(key) and not note_signed_by(note, bytes.fromhex(key)):
        raise NotCanonical("the note is not signed by the checkpoint's key")


def verify_inclusion(leaf, index, size, path, root):
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root


def verify_consistency(m, n, old_root, new_root, path):
    if m == 0 or m > n:
        return False
    if m == n:
        return not path and old_root == new_root
    path = ([old_root] if m & (m - 1) == 0 else []) + list(path)
    if not path:
        return False
    fn, sn = m - 1, n - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and fr == old_root and sr == new_root


def check_proof(text, key_raw):
    """(True, what it proves) or (False, why not)."""
    lines = text.split("\n")
    try:
        if lines[0] == "c2sp.org/tlog-proof@v1":
            if "\n\n" not in text:
                return False, "no empty line before the checkpoint"
            head, note_text = text.split("\n\n", 1)
            head = head.split("\n")[1:]
            if not head or not head[0].startswith("extra "):
                return False, "no record (extra line)"
            record = base64.b64decode(head[0][6:], validate=True)
            if len(head) < 2 or not re.fullmatch(r"index (0|[1-9][0-9]*)", head[1]):
                return False, "no index line"
            index = int(head[1][6:])
            path = [b64_hash(h) for h in head[2:]]
            if None in path:
                return False, "a path hash is not base64 SHA-256"
            note = parse_note(note_text)
            if not note_signed_by(note, key_raw):
                return False, "the checkpoint is not signed by this key"
            m = re.match(rb'\{"seq":([0-9]+),', record)
            if m is None or int(m.group(1)) != index + 1:
                return False, "the record's seq is not index + 1"
            if not verify_inclusion(leaf_hash(record), index, note[1], path, note[2]):
                return False, "the inclusion path does not lead to the checkpoint's root"
            return True, "record seq %d is in log %s (tree size %d)" % (index + 1, note[0], note[1])
        if lines[0] == "fsgate.audit/consistency-proof@v1":
            if len(lines) < 3 or not lines[1].startswith("old ") or not lines[2].startswith("new "):
                return False, "no old/new lines"
            old = parse_note(base64.b64decode(lines[1][4:], validate=True).decode())
            new = parse_note(base64.b64decode(lines[2][4:], validate=True).decode())
            if not (note_signed_by(old, key_raw) and note_signed_by(new, key_raw)):
                return False, "a checkpoint is not signed by this key"
            if old[0] != new[0]:
                return False, "the checkpoints are of different logs"
            path = [b64_hash(h) for h in lines[3:] if h]
            if None in path:
                return False, "a path hash is not base64 SHA-256"
            if not verify_consistency(old[1], new[1], old[2], new[2], path):
                return False, "the new tree does not extend the old one"
            return True, "log %s: tree size %d extends tree size %d" % (new[0], new[1], old[1])
    except (NotCanonical, binascii.Error, ValueError, UnicodeDecodeError) as e:
        return False, str(e)
    return False, "not a proof: unknown first line"


def parse_tombstone(line):
    obj = parse_sidecar(line, TOMBSTONE_NAMES, "tombstone")
    if type(obj.get("last_hash")) is not str or not HEX64.fullmatch(obj["last_hash"]):
        raise NotCanonical("last_hash is not 64 lowercase hex digits")
    for k in ("log", "ts", "before"):
        if type(obj.get(k)) is not str:
            raise NotCanonical("%s missing" % k)
    for k in ("first_seq", "last_seq"):
        if not is_u64(obj.get(k)):
            raise NotCanonical("%s missing" % k)
    return obj


def sidecar_lines(path, must_exist):
    """[(line number, text)] of non-blank lines; raises OSError when unreadable."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        if must_exist:
            raise
        return []
    text = data.decode("utf-8", "replace")
    pieces = text.split("\n")
    if text.endswith("\n"):
        pieces.pop()
    out = []
    for i, piece in enumerate(pieces):
        if piece.endswith("\r"):
            piece = piece[:-1]
        if piece.strip(WHITESPACE):
            out.append((i + 1, piece))
    return out


# ---- Section 1: series --------------------------------------------------------------------

def is_sidecar(name):
    return (name.startswith(".") or name.endswith(".checkpoint") or name.endswith(".tombstones")
            or name.endswith(".lock") or name.endswith(".tmp") or ".broken-" in name)


def split_name(name):
    base, dot, digits = name.rpartition(".")
    if dot and base and len(digits) >= 12 and re.fullmatch(r"[0-9]+", digits, re.ASCII):
        n = int(digits)
        if n <= U64_MAX:
            return base, n
    return name, None


def discover(paths):
    groups = {}

    def add(path):
        name = os.path.basename(path)
        base, seq = split_name(name)
        key = (0, seq, name) if seq is not None else (1, 0, name)
        groups.setdefault((os.path.dirname(path), base), {})[key] = path

    for p in paths:
        if os.path.isdir(p):
            with os.scandir(p) as it:
                for e in it:
                    if e.is_file(follow_symlinks=False) and not is_sidecar(e.name):
                        add(os.path.join(p, e.name))
        else:
            os.stat(p)  # raises when missing
            add(p)
            name = os.path.basename(p)
            if split_name(name)[1] is None and not is_sidecar(name):
                # An active file stands for its whole series: its rotated files beside it.
                d = os.path.dirname(p)
                with os.scandir(d or ".") as it:
                    for e in it:
                        base, seq = split_name(e.name)
                        if (seq is not None and base == name and not is_sidecar(e.name)
                                and e.is_file(follow_symlinks=False)):
                            add(os.path.join(d, e.name))
    if not groups:
        raise OSError("no audit log files found")
    return [(d, b, [files[k] for k in sorted(files)]) for (d, b), files in sorted(groups.items())]


# ---- Section 9: verifying -------------------------------------------------------------------

class Failed(Exception):
    pass


class Series:
    def __init__(self, directory, base, files, opts):
        self.dir, self.base, self.files, self.opts = directory, base, files, opts
        self.rep = {
            "log": os.path.join(directory, base), "log_id": None, "verdict": "intact",
            "records": 0, "first_seq": None, "last_seq": None, "first_ts": None,
            "last_ts": None, "files": [], "checkpoint": None, "error": None, "warnings": [],
            "open_intents": [],
        }
        self.open_intents = {}
        self.wanted = {}
        self.tree = Tree()  # None once a record is missing from it (pruned)
        self.roots = {}
        self.last_hash = None

    def fail(self, kind, seq, path, line, message):
        self.rep["verdict"] = "unreadable" if kind == "unreadable" else "tampered"
        self.rep["error"] = {"kind": kind, "seq": seq, "file": path, "line": line,
                             "message": message}
        raise Failed()

    def warn(self, text):
        self.rep["warnings"].append(text)

    def absent_file(self, first, after=None):
        """Why records before a file's first record (one with `log`) are absent, or ''."""
        if any(split_name(os.path.basename(f)) == (self.base, first) for f in self.files):
            return ""
        path = os.path.join(self.dir, "%s.%012d" % (self.base, first))
        if os.path.exists(path):
            return ": %s holds them but was not given" % path
        unless = " (unless %s lost its last records)" % after if after else ""
        return ": the rotated file %s is missing%s" % (path, unless)

    def run(self):
        try:
            self.verify()
        except Failed:
            pass
        return self.rep

    def verify(self):
        opts = self.opts
        tomb_path = os.path.join(self.dir, self.base + ".tombstones")
        cp_files = [(os.path.join(self.dir, self.base + ".checkpoint"), False)]
        cp_files += [(p, True) for p in opts.checkpoint]
        # Step 1.
        try:
            tomb_lines = sidecar_lines(tomb_path, False)
            checkpoints = []
            for path, explicit in cp_files:
                for n, line in sidecar_lines(path, explicit):
                    try:
                        cp = parse_checkpoint(line)
                        self.wanted[cp["seq"]] = None
                        if "root" in cp:
                            self.roots[cp["seq"]] = None
                        checkpoints.append((path, n, cp, None))
                    except NotCanonical as e:
                        checkpoints.append((path, n, None, str(e)))
        except OSError as e:
            self.fail("unreadable", None, None, None, str(e))
        trusted = None
        if opts.trusted:
            try:
                with open(opts.trusted, "rb") as f:
                    trusted = json.loads(f.read().decode("utf-8"))
                ok = (type(trusted) is dict and trusted.get("type") == "trusted"
                      and type(trusted.get("log")) is str and is_u64(trusted.get("seq"))
                      and type(trusted.get("hash")) is str)
                if not ok:
                    self.fail("unreadable", None, None, None, "not a trusted-state file")
                self.wanted[trusted["seq"]] = None
            except FileNotFoundError:
                trusted = None
            except (OSError, ValueError) as e:
                self.fail("unreadable", None, None, None, "trusted state: %s" % e)
        tombs = []
        for n, line in tomb_lines:
            try:
                tombs.append((n, parse_tombstone(line), None))
            except NotCanonical as e:
                tombs.append((n, None, str(e)))
        # Step 2.
        self.chain(tombs)
        # Step 3.
        for n, t, err in tombs:
            if t is None:
                self.fail("malformed", None, tomb_path, n, "tombstone: %s" % err)
            status, msg = signature_status(t, opts.pinned)
            if status == "invalid":
                self.fail("bad_signature", t["last_seq"], tomb_path, n,
                          "tombstone signature: %s" % msg)
        # Step 4.
        self.check_checkpoints(checkpoints)
        # Step 5.
        if opts.trusted:
            self.check_trusted(trusted)

    def chain(self, tombs):
        expected = None  # (seq, hash)
        for fi, path in enumerate(self.files):
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError as e:
                self.fail("unreadable", None, None, None, "%s: %s" % (path, e))
            pieces = data.split(b"\n")
            torn = pieces.pop()
            results = [check_line(p) for p in pieces]
            fr = {"path": path, "records": 0, "first_seq": None, "last_seq": None,
                  "first_ts": None, "last_ts": None, "last_hash": None}
            self.rep["files"].append(fr)
            for li, (status, val) in enumerate(results):
                line_no = li + 1
                if status == "malformed":
                    self.fail("malformed", None, path, line_no, "malformed record: %s" % val)
                if status == "modified":
                    self.fail("modified", val, path, line_no,
                              "record seq %d was modified: its hash does not match its content" % val)
                info = val
                if expected is None:
                    if info.prev != GENESIS:
                        found = next((t for _, t, _ in tombs if t is not None
                                      and t["last_seq"] + 1 == info.seq
                                      and t["last_hash"] == info.prev), None)
                        if found is None:
                            self.fail("missing", info.seq, path, line_no,
                                      "records before seq %d are missing: no genesis and no tombstone%s"
                                      % (info.seq, self.absent_file(1) if info.log is not None else ""))
                        self.warn("records %d..%d were pruned on %s" % (
                            found["first_seq"], found["last_seq"], found["ts"]))
                else:
                    eseq, ehash = expected
                    if info.seq != eseq + 1 or info.prev != ehash:
                        if li == 0:
                            kind, msg = "gap", "file does not continue the previous one"
                            if info.seq > eseq + 1 and info.log is not None:
                                msg += self.absent_file(eseq + 1, os.path.basename(self.files[fi - 1]))
                        elif info.seq == eseq + 1:
                            kind, msg = "modified", "does not chain on seq %d" % eseq
                        elif info.seq <= eseq or any(
                                s == "ok" and v.seq == eseq + 1 for s, v in results[li + 1:]):
                            kind, msg = "reordered", "seq %d where %d was expected" % (info.seq, eseq + 1)
                        else:
                            kind, msg = "missing", "seq %d follows seq %d" % (info.seq, eseq)
                        self.fail(kind, info.seq, path, line_no, msg)
                if info.log is not None:
                    if self.rep["log_id"] is None:
                        self.rep["log_id"] = info.log
                    elif self.rep["log_id"] != info.log:
                        self.fail("gap", info.seq, path, line_no, "belongs to another log")
                if info.kind is not None:
                    self.warn("seq %d is a %s record" % (info.seq, info.kind))
                if info.seq in self.wanted:
                    self.wanted[info.seq] = info.hash
                if self.tree is not None and info.seq != self.tree.size + 1:
                    self.tree = None
                if self.tree is not None:
                    self.tree.push(leaf_hash(pieces[li]))
                    if info.seq in self.roots:
                        self.roots[info.seq] = self.tree.root().hex()
                if fr["records"] == 0:
                    fr["first_seq"], fr["first_ts"] = info.seq, info.ts
                    if self.rep["records"] == 0:
                        self.rep["first_seq"], self.rep["first_ts"] = info.seq, info.ts
                fr["records"] += 1
                self.rep["records"] += 1
                fr["last_seq"], fr["last_ts"], fr["last_hash"] = info.seq, info.ts, info.hash
                self.rep["last_seq"], self.rep["last_ts"] = info.seq, info.ts
                self.last_hash = info.hash
                expected = (info.seq, info.hash)
                self.observe_intents(info.rec)
            if torn:
                seq = expected[0] + 1 if expected else None
                if fi == len(self.files) - 1:
                    self.fail("truncated", seq, path, len(pieces) + 1,
                              "truncated tail: torn last line (%d bytes)" % len(torn))
                self.fail("malformed", None, path, len(pieces) + 1, "file ends without a newline")
        if self.rep["records"] == 0:
            self.warn("the log holds no records")
        for seq, passed in sorted(self.open_intents.items()):
            if passed is None:
                self.warn("intent seq %d has no outcome yet" % seq)
            else:
                self.warn("intent seq %d was never closed (start seq %d passed it)" % (seq, passed))
            self.rep["open_intents"].append({"seq": seq, "passed_start": passed})

    def observe_intents(self, rec):
        """Section 9, step 2b: intents must be closed by an outcome or a reconciliation."""
        def closes(field):
            v = rec.get(field, {}).get("intent")
            return v if type(v) is int and v >= 0 else None
        kind = rec["kind"]
        if kind == "intent":
            self.open_intents[rec["seq"]] = None
        elif kind == "request" and closes("args") is not None:
            self.open_intents.pop(closes("args"), None)
        elif kind == "reconciled" and closes("details") is not None:
            self.open_intents.pop(closes("details"), None)
        elif kind == "start" and "check" in rec.get("details", {}):
            for seq, passed in self.open_intents.items():
                if passed is None:
                    self.open_intents[seq] = rec["seq"]

    def check_checkpoints(self, cps):
        if not cps:
            self.warn("no checkpoint: a cut-off tail or a rewritten log cannot be detected")
            return
        last = self.rep["last_seq"] or 0
        first = self.rep["first_seq"] or 0
        latest = None
        for path, n, cp, err in cps:
            if cp is None:
                self.fail("malformed", None, path, n, "checkpoint: %s" % err)
            status, msg = signature_status(cp, self.opts.pinned)
            if status == "invalid":
                self.fail("bad_signature", cp["seq"], path, n, "checkpoint: %s" % msg)
            if self.rep["log_id"] is not None and cp["log"] != self.rep["log_id"]:
                self.fail("replaced", cp["seq"], path, n, "checkpoint belongs to another log")
            if cp["seq"] > last:
                self.fail("truncated", cp["seq"], path, n,
                          "checkpoint covers seq %d but the log ends at seq %d" % (cp["seq"], last))
            if cp["seq"] < first:
                self.warn("checkpoint seq %d lies in pruned records" % cp["seq"])
                continue
            if self.wanted.get(cp["seq"]) != cp["hash"]:
                self.fail("replaced", cp["seq"], path, n,
                          "record seq %d differs from the checkpoint" % cp["seq"])
            if "root" in cp:
                if self.roots.get(cp["seq"]) is None:
                    self.warn("the Merkle root of checkpoint seq %d was not recomputed" % cp["seq"])
                elif self.roots[cp["seq"]] != cp["root"]:
                    self.fail("replaced", cp["seq"], path, n,
                              "the checkpoint's Merkle root is not the root of records 1..%d"
                              % cp["seq"])
            if latest is None or cp["seq"] >= latest["seq"]:
                latest = {"seq": cp["seq"], "ts": cp["ts"], "kind": cp["kind"], "signature": status}
        if latest is not None:
            if latest["signature"] == "unsigned":
                self.warn("the checkpoint is unsigned")
            elif latest["signature"] == "unpinned":
                self.warn("the checkpoint is signed by a key nobody pinned")
            if latest["seq"] < last:
                self.warn("records %d..%d come after the latest checkpoint" % (latest["seq"] + 1, last))
        self.rep["checkpoint"] = latest

    def check_trusted(self, t):
        path = self.opts.trusted
        if t is None:
            self.warn("no earlier trusted state in %s: recording it now" % path)
        else:
            if self.rep["log_id"] is not None and t["log"] != self.rep["log_id"]:
                self.fail("replaced", t["seq"], path, 1, "trusted state is for another log")
            if t["seq"] > (self.rep["last_seq"] or 0):
                self.fail("truncated", t["seq"], path, 1, "log ends before the trusted seq")
            if t["seq"] < (self.rep["first_seq"] or 0):
                self.warn("trusted seq lies in pruned records")
            elif self.wanted.get(t["seq"]) != t["hash"]:
                self.fail("replaced", t["seq"], path, 1, "record differs from the trusted state")
        if self.rep["log_id"] and self.rep["last_seq"] and self.last_hash:
            state = {"type": "trusted", "v": 1, "log": self.rep["log_id"],
                     "seq": self.rep["last_seq"], "hash": self.last_hash,
                     "ts": self.rep["last_ts"],
                     "verified_at": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())}
            tmp = path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(enc_sidecar(state) + b"\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)


def render(rep):
    out = []
    for s in rep["series"]:
        out.append("%s  %s" % (s["verdict"].upper(), s["log"]))
        e = s["error"]
        if e:
            out.append("  first bad record: seq %s, %s line %s" % (e["seq"], e["file"], e["line"]))
            out.append("  what is wrong: %s: %s" % (e["kind"], e["message"]))
        out.append("  %d records checked, seq %s..%s, %s .. %s" % (
            s["records"], s["first_seq"], s["last_seq"], s["first_ts"], s["last_ts"]))
        if s["checkpoint"]:
            c = s["checkpoint"]
            out.append("  checkpoint: seq %d (%s, %s), signature %s" % (
                c["seq"], c["kind"], c["ts"], c["signature"]))
        for w in s["warnings"]:
            out.append("  warning: " + w)
    if rep.get("error"):
        out.append("UNREADABLE  " + rep["error"])
    return "\n".join(out)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--check-proof", metavar="PROOF")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--pubkey")
    ap.add_argument("--checkpoint", action="append", default=[])
    ap.add_argument("--trusted")
    try:
        opts = ap.parse_args(argv)
    except SystemExit:
        return 2
    try:
        opts.pinned = load_public_key(opts.pubkey) if opts.pubkey else None
        if opts.pinned is not None and len(opts.pinned) != 32:
            raise ValueError("public key is not 32 bytes")
    except (OSError, ValueError) as e:
        print("verify.py: bad --pubkey: %s" % e, file=sys.stderr)
        return 2
    if opts.check_proof:
        if opts.pinned is None:
            print("verify.py: --check-proof needs --pubkey", file=sys.stderr)
            return 2
        try:
            with open(opts.check_proof, "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError as e:
            print("verify.py: %s" % e, file=sys.stderr)
            return 2
        ok, what = check_proof(text, opts.pinned)
        print(("VALID  " if ok else "INVALID  ") + what)
        return 0 if ok else 1
    if not opts.paths:
        print("verify.py: name the log files or directories", file=sys.stderr)
        return 2
    try:
        groups = discover(opts.paths)
    except OSError as e:
        rep = {"verdict": "unreadable", "series": [], "error": str(e)}
    else:
        if opts.trusted and len(groups) > 1:
            rep = {"verdict": "unreadable", "series": [],
                   "error": "--trusted needs exactly one log, but several were given"}
        else:
            series = [Series(d, b, f, opts).run() for d, b, f in groups]
            verdicts = {s["verdict"] for s in series}
            verdict = ("tampered" if "tampered" in verdicts else
                       "unreadable" if "unreadable" in verdicts else "intact")
            rep = {"verdict": verdict, "series": series}
    print(json.dumps(rep, indent=2) if opts.json else render(rep))
    return {"intact": 0, "tampered": 1, "unreadable": 2}[rep["verdict"]]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
