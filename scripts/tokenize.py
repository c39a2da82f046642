#!/usr/bin/env python3
"""Text into fsdp-run's token files, through a Hugging Face tokenizer.

usage: tokenize.py encode TEXT... --tokenizer T -o OUT.bin
                          [--ids auto|uint16|uint32] [--eot TOKEN]
           Encodes each TEXT file (one document each) with T (a
           tokenizer.json, or a directory holding one, as save_pretrained
           writes) and writes llm.c's token file: a header of 256 int32
           (magic, version, count) and the ids, uint16 under magic 20240520
           (version 1) where every id fits, else uint32 under Llama 3's
           magic 20240801 (version 7); --ids forces one (uint16 refuses a
           vocabulary above 65,536). --eot TOKEN puts that special token
           before every document, as llm.c's data scripts do with
           <|endoftext|> (GPT-2) or <|begin_of_text|> (Llama 3).
       tokenize.py train TEXT... --vocab-size N -o tokenizer.json
                          [--special TOKEN]...
           Trains a byte-level BPE (GPT-2's and Llama 3's kind) of N ids on
           the TEXT files: a tokenizer of one's own, for tests and for data
           with no published tokenizer (special tokens default to
           <|endoftext|>).

Needs the `tokenizers` package (PyPI; scripts/setup-python.sh installs it).
Nothing is downloaded: the tokenizer is a file. Output is written to a
temporary name and renamed, so a failure leaves no half-written file.
"""
import argparse
import os
import struct
import sys
import tempfile

MAGIC16, VERSION16 = 20240520, 1
MAGIC32, VERSION32 = 20240801, 7
HEADER_INTS = 256


def fail(message):
    sys.exit("tokenize: " + message)


def need_tokenizers():
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        fail("the Python package tokenizers is not installed "
             "(scripts/setup-python.sh installs it; or pip install tokenizers)")
    return tokenizers


def read_text(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        fail("%s: cannot read: %s" % (path, e.strerror))
    except UnicodeDecodeError as e:
        fail("%s: not UTF-8 text (byte %d)" % (path, e.start))


def load_tokenizer(path):
    tokenizers = need_tokenizers()
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    if not os.path.isfile(path):
        fail("%s: no such tokenizer file" % path)
    try:
        return tokenizers.Tokenizer.from_file(path), path
    except Exception as e:  # the library raises its own exception types
        fail("%s: not a tokenizer.json: %s" % (path, e))


def write_atomically(path, chunks):
    """Writes the byte strings `chunks` to `path` through a temporary file
    in the same directory, renamed into place once complete."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix=".tokenize.", dir=directory)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp's 0600 is for secrets
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise


def encode(args):
    tokenizer, source = load_tokenizer(args.tokenizer)
    vocab = tokenizer.get_vocab_size(with_added_tokens=True)
    eot = None
    if args.eot is not None:
        eot = tokenizer.token_to_id(args.eot)
        if eot is None:
            fail("%s has no token %r (--eot)" % (source, args.eot))
    ids = []
    for path in args.text:
        if eot is not None:
            ids.append(eot)
        ids.extend(tokenizer.encode(read_text(path),
                                    add_special_tokens=False).ids)
    if not ids:
        fail("no tokens: the text is empty")
    if len(ids) >= 2**31:
        fail("%d tokens: a token file holds fewer than 2^31" % len(ids))
    width = args.ids
    if width == "auto":
        width = "uint16" if vocab <= 65536 else "uint32"
    if width == "uint16" and max(ids) > 65535:
        fail("%s: a vocabulary of %d does not fit uint16 ids (--ids uint32)"
             % (source, vocab))
    magic, version, code = ((MAGIC16, VERSION16, "H") if width == "uint16"
                            else (MAGIC32, VERSION32, "I"))
    header = [magic, version, len(ids)] + [0] * (HEADER_INTS - 3)
    write_atomically(args.output, [struct.pack("<256i", *header),
                                   struct.pack("<%d%s" % (len(ids), code),
                                               *ids)])
    print("tokenize: %d tokens from %d file%s (vocabulary %d, largest id %d) "
          "-> %s (%s ids)" % (len(ids), len(args.text),
                              "" if len(args.text) == 1 else "s", vocab,
                              max(ids), args.output, width))


def train(args):
    tokenizers = need_tokenizers()
    from tokenizers import decoders, models, pre_tokenizers, trainers
    tokenizer = tokenizers.Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    special = args.special or ["<|endoftext|>"]
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if args.vocab_size < len(alphabet) + len(special):
        fail("--vocab-size %d is below the %d byte symbols and %d special "
             "tokens" % (args.vocab_size, len(alphabet), len(special)))
    trainer = trainers.BpeTrainer(vocab_size=args.vocab_size,
                                  special_tokens=special,
                                  initial_alphabet=alphabet,
                                  show_progress=False)
    texts = [read_text(p) for p in args.text]
    tokenizer.train_from_iterator(texts, trainer=trainer)
    write_atomically(args.output, [tokenizer.to_str().encode("utf-8")])
    print("tokenize: trained a byte-level BPE of %d ids on %d file%s -> %s"
          % (tokenizer.get_vocab_size(), len(texts),
             "" if len(texts) == 1 else "s", args.output))


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("encode")
    e.add_argument("text", nargs="+")
    e.add_argument("--tokenizer", required=True)
    e.add_argument("-o", "--output", required=True)
    e.add_argument("--ids", choices=["auto", "uint16", "uint32"],
                   default="auto")
    e.add_argument("--eot")
    t = sub.add_parser("train")
    t.add_argument("text", nargs="+")
    t.add_argument("--vocab-size", type=int, required=True)
    t.add_argument("-o", "--output", required=True)
    t.add_argument("--special", action="append")
    args = p.parse_args()
    (encode if args.command == "encode" else train)(args)


if __name__ == "__main__":
    main()
