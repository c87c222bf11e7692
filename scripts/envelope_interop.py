#!/usr/bin/env python3
"""An independent implementation of the CloudSync envelope (docs/encryption.md, "Encrypted envelope format"), on PyNaCl.

    envelope_interop.py decrypt ENVELOPE STORE_KEY (--key-file PATH | --passphrase-env VAR)
    envelope_interop.py encrypt PLAINTEXT STORE_KEY KEY_ID (--key-file PATH | --passphrase-env VAR --ops N --mem BYTES)

Plaintexts travel as UTF-8 on stdin/stdout of the test, and are printed exactly (no trailing newline).
Written from the documented format alone; it shares no code with CloudSync.
"""
import argparse
import base64
import os
import sys

import nacl.bindings
import nacl.pwhash
import nacl.utils


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url_encode(data):
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def raw_key(path):
    with open(path, "rb") as handle:
        key = base64.b64decode(handle.read().strip(), validate=True)
    if len(key) != 32:
        sys.exit("key file does not hold 32 bytes")
    return key


def derive(passphrase, ops, mem, salt):
    return nacl.pwhash.argon2id.kdf(32, passphrase, salt, opslimit=ops, memlimit=mem)


def decrypt(args):
    version, key_id, kdf, payload = args.envelope.split(":", 3)
    if version != "cs1":
        sys.exit("not a cs1 envelope")
    if kdf == "raw":
        key = raw_key(args.key_file)
    else:
        name, ops, mem, salt = kdf.split(".")
        if name != "argon2id13":
            sys.exit("unknown key derivation")
        key = derive(os.environb[args.passphrase_env.encode()], int(ops), int(mem), b64url_decode(salt))
    blob = b64url_decode(payload)
    nonce, ciphertext = blob[:24], blob[24:]
    associated = ("%s:%s:%s:" % (version, key_id, kdf)).encode() + args.store_key.encode()
    plaintext = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(ciphertext, associated, nonce, key)
    sys.stdout.buffer.write(plaintext)


def encrypt(args):
    if args.key_file:
        key, kdf = raw_key(args.key_file), "raw"
    else:
        salt = nacl.utils.random(16)
        key = derive(os.environb[args.passphrase_env.encode()], args.ops, args.mem, salt)
        kdf = "argon2id13.%d.%d.%s" % (args.ops, args.mem, b64url_encode(salt))
    header = "cs1:%s:%s:" % (args.key_id, kdf)
    nonce = nacl.utils.random(24)
    ciphertext = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_encrypt(
        args.plaintext.encode(), (header + args.store_key).encode(), nonce, key)
    sys.stdout.write(header + b64url_encode(nonce + ciphertext))


parser = argparse.ArgumentParser()
commands = parser.add_subparsers(dest="command", required=True)
dec = commands.add_parser("decrypt")
dec.add_argument("envelope")
dec.add_argument("store_key")
enc = commands.add_parser("encrypt")
enc.add_argument("plaintext")
enc.add_argument("store_key")
enc.add_argument("key_id")
for sub in (dec, enc):
    sub.add_argument("--key-file")
    sub.add_argument("--passphrase-env")
enc.add_argument("--ops", type=int, default=2)
enc.add_argument("--mem", type=int, default=64 * 1024 * 1024)
arguments = parser.parse_args()
decrypt(arguments) if arguments.command == "decrypt" else encrypt(arguments)
