#!/usr/bin/env python3
"""An independent restore of a CloudSync backup repository kept in a directory (docs/backup-format.md), on PyNaCl and
the zstandard package.

    backup_restore.py (--repository DIR | --s3-endpoint URL --bucket NAME [--prefix P]) --key-file FILE
                      [--snapshot ID|PREFIX] (--out FILE.json | --out-dir DIR)

Writes the snapshot's keys and values as one JSON object to --out, or each value's bytes to a file named by its key
under --out-dir (binary values need it), from the newest snapshot unless --snapshot names one; every snapshot's id
goes to standard error. A repository in S3 is read with boto3 (credentials from the usual AWS_* variables), each
object being the repository object's name after --prefix. --key-file is the key file of the pipeline codec's key that wrapped
the repository's keys. Written from the format page alone; it shares no code with CloudSync.
"""
import argparse
import base64
import json
import os
import sys
import zlib

import nacl.bindings
import nacl.encoding
import nacl.hash
import zstandard

PREFIX = "cloudsync-repo."
# An object stored as one of these marks and base64 is compressed (format 2: raw DEFLATE; format 3: a zstd frame),
# and its associated data starts with the mark too.
DEFLATE = "deflate:"
ZSTD = "zstd:"
# An object in the byte form (format 3, on providers that store files) starts with a zero byte, then its mark's code.
BINARY_MARKS = {0: "", 1: DEFLATE, 2: ZSTD}
# A tree entry's value id with this prefix names a value stored in chunks.
CHUNKS = "chunks:"
# The most bytes an object may open to, as the writer bounds it.
MAX_OBJECT_BYTES = 1 << 30


def fail(message):
    sys.exit("backup_restore: " + message)


def raw_key(path):
    with open(path, "rb") as handle:
        key = base64.b64decode(handle.read().strip(), validate=True)
    if len(key) != 32:
        fail("the key file does not hold 32 bytes")
    return key


def open_envelope(envelope, store_key, key):
    """A cs1 envelope with a raw key (docs/encryption.md, "Encrypted envelope format")."""
    version, _key_id, kdf, payload = envelope.split(":", 3)
    if version != "cs1" or kdf != "raw":
        fail("the config's keys are not a cs1 envelope of a raw key")
    blob = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    header = envelope[: len(envelope) - len(payload)]
    return nacl.bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(
        blob[24:], (header + store_key).encode(), blob[:24], key)


class DirectoryObjects:
    """A repository kept in a directory provider: each object a file named as the object."""

    def __init__(self, directory):
        self.directory = directory

    def names(self):
        return [name for name in os.listdir(self.directory) if name.startswith(PREFIX)]

    def read(self, name):
        with open(os.path.join(self.directory, name), "rb") as handle:
            return handle.read()


class S3Objects:
    """A repository kept in an S3 provider: each object the bucket's object at the provider's prefix and its name."""

    def __init__(self, endpoint, bucket, prefix):
        import boto3  # only for repositories in S3

        self.client = boto3.client("s3", endpoint_url=endpoint)
        self.bucket, self.prefix = bucket, prefix

    def names(self):
        found = []
        for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix + PREFIX):
            found += [item["Key"][len(self.prefix):] for item in page.get("Contents", [])]
        return found

    def read(self, name):
        return self.client.get_object(Bucket=self.bucket, Key=self.prefix + name)["Body"].read()


class Repository:
    def __init__(self, objects, key):
        self.objects = objects
        self.names = sorted(objects.names())
        config = json.loads(self.read(PREFIX + "config"))
        if config["format"] > 3:
            fail("the repository has format %d; this script reads formats 1 to 3" % config["format"])
        keys = base64.b64decode(open_envelope(config["keys"], PREFIX + "config", key), validate=True)
        if len(keys) != 64:
            fail("the config's keys are not 64 bytes")
        self.data_key, self.id_key = keys[:32], keys[32:]
        self.index = {}
        for name in self.kind("index"):
            for pack, blobs in json.loads(self.open(name)).items():
                if pack == "sizes":  # format 2: the packs' stored bytes
                    continue
                for blob_id, offset, length in blobs:
                    self.index[blob_id] = (pack, offset, length)
        self.packs = {}

    def read(self, name):
        return self.objects.read(name)

    def kind(self, kind):
        return [name for name in self.names if name.startswith(PREFIX + kind + ".")]

    def open(self, name):
        stored = self.read(name)
        if stored[:1] == b"\0":  # the byte form: zero, the mark's code, the sealed bytes
            mark, sealed = BINARY_MARKS[stored[1]], stored[2:]
        else:  # the text form: the mark, then base64 of the sealed bytes
            text = stored.decode("utf-8")
            mark = next((mark for mark in (DEFLATE, ZSTD) if text.startswith(mark)), "")
            sealed = base64.b64decode(text[len(mark):], validate=True)
        plaintext = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(
            sealed[24:], (mark + name).encode(), sealed[:24], self.data_key)
        if mark == DEFLATE:  # a raw DEFLATE stream (zlib's window bits -15)
            return zlib.decompress(plaintext, -15)
        if mark == ZSTD:  # one zstd frame, its size in its header
            return zstandard.ZstdDecompressor().decompress(plaintext, max_output_size=MAX_OBJECT_BYTES)
        return plaintext

    def blob(self, blob_id):
        pack, offset, length = self.index[blob_id]
        if pack not in self.packs:
            self.packs[pack] = self.open(PREFIX + "data." + pack)
        data = self.packs[pack][offset:offset + length]
        digest = nacl.hash.blake2b(data, digest_size=16, key=self.id_key, encoder=nacl.encoding.HexEncoder)
        if digest.decode("ascii") != blob_id:
            fail("blob %s in pack %s does not hash to its id" % (blob_id, pack))
        return data

    def value(self, value_id):
        """A value's bytes: one blob, or (format 3) `chunks:<size>:<list id>`, the list naming its chunks in order."""
        if not value_id.startswith(CHUNKS):
            return self.blob(value_id)
        size, list_id = value_id[len(CHUNKS):].split(":", 1)
        data = b"".join(self.blob(chunk) for chunk in json.loads(self.blob(list_id)))
        if len(data) != int(size):
            fail("a chunked value is %d bytes, not the %s its tree says" % (len(data), size))
        return data

    def tree_ids(self, snapshot):
        """The snapshot's tree ids: `trees`, or `treeLists` replaced `treeLevels` times by the ids each list holds."""
        if "trees" in snapshot:
            return snapshot["trees"]
        ids, levels = snapshot.get("treeLists"), snapshot.get("treeLevels")
        if not isinstance(ids, list) or not isinstance(levels, int) or levels < 1:
            fail("the snapshot names no trees")
        for _ in range(levels):
            ids = [tree for list_id in ids for tree in json.loads(self.blob(list_id))]
        return ids

    def snapshots(self):
        found = []
        for name in self.kind("snapshot"):
            found.append((json.loads(self.open(name)), name[len(PREFIX + "snapshot."):]))
        return sorted(found, key=lambda item: (item[0]["time"], item[1]))


def main():
    parser = argparse.ArgumentParser()
    sources = parser.add_mutually_exclusive_group(required=True)
    sources.add_argument("--repository")
    sources.add_argument("--s3-endpoint")
    parser.add_argument("--bucket")
    parser.add_argument("--prefix", default="")
    parser.add_argument("--key-file", required=True)
    parser.add_argument("--snapshot")
    outputs = parser.add_mutually_exclusive_group(required=True)
    outputs.add_argument("--out")
    outputs.add_argument("--out-dir")
    args = parser.parse_args()
    if args.repository is not None:
        objects = DirectoryObjects(args.repository)
    elif args.bucket is None:
        fail("--s3-endpoint needs --bucket")
    else:
        objects = S3Objects(args.s3_endpoint, args.bucket, args.prefix)
    repository = Repository(objects, raw_key(args.key_file))
    snapshots = repository.snapshots()
    for snapshot, snapshot_id in snapshots:
        print("%s %d keys" % (snapshot_id, snapshot["keys"]), file=sys.stderr)
    chosen = [item for item in snapshots if args.snapshot is None or item[1].startswith(args.snapshot)]
    if not chosen or (args.snapshot is not None and len(chosen) > 1):
        fail("no single snapshot matches %s" % (args.snapshot or "latest"))
    snapshot = chosen[-1][0]
    restored = {}
    trees = repository.tree_ids(snapshot)
    levels = snapshot.get("treeLevels", 0)
    print("restoring %s: %d trees, %d levels of tree lists" % (chosen[-1][1], len(trees), levels), file=sys.stderr)
    for tree in trees:
        for entry in json.loads(repository.blob(tree)):
            key, value_id = entry[0], entry[1]  # a third element, when present, is the source's version tag
            if args.out_dir is None:
                restored[key] = repository.value(value_id).decode("utf-8")
                continue
            path = os.path.normpath(os.path.join(args.out_dir, key))
            if os.path.isabs(key) or not path.startswith(os.path.normpath(args.out_dir) + os.sep):
                fail("the key %r would be written outside %s" % (key, args.out_dir))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(repository.value(value_id))
            restored[key] = True
    if len(restored) != snapshot["keys"]:
        fail("the snapshot says %d keys but its trees hold %d" % (snapshot["keys"], len(restored)))
    if args.out is not None:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(restored, handle, ensure_ascii=False, sort_keys=True)


if __name__ == "__main__":
    main()
