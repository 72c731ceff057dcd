"""Dump an inference engine's intermediate tensors for Layerscope.

One file, NumPy only (PyTorch tensors are taken too). It writes a folder of .npy files with a
manifest.json in the format `layerscope compare` reads (engine/compare/reference_formats.md):

    import layerscope_dump

    with layerscope_dump.Dumper("my_dump", prompt_tokens=tokens) as d:
        d.dump("model.embed_tokens", x)          # (T, n_embd): token-first, as engines hold it
        ...
        d.next_decode()                          # the next forward call (a generated token)
        d.dump("model.embed_tokens", x)
        d.generated(token)

    layerscope compare my_dump llama.gguf -m model.gguf

Names are yours: Hugging Face module paths (`model.layers.0.self_attn.q_proj`), Meta names
(`layers.0.attention.wq`), llama.cpp's names (`Qcur-0`), or anything a `--names` map file
translates. The order of `dump` calls is recorded as the execution order. A name dumped twice in
one forward call is recorded as its second occurrence.

Layouts: `token-first` (the default) is an array whose first axis (after a batch axis of size 1)
is the token, as PyTorch and NumPy engines hold activations: (T, n_embd), (1, T, n_embd),
(T, n_head, head_dim). `heads-first` is (n_head, T, head_dim) or (1, n_head, T, head_dim), as
attention code holds queries after `transpose(1, 2)`; it is permuted to token-first before it is
written. `transposed` is (features, T), e.g. a column-major engine's buffer; it is transposed.
`ggml` writes the array as it is, its shape being ggml's `ne` reversed.

To dump every module of a PyTorch model, `hook_modules(model, dumper)` registers forward hooks
that dump each module's output under its module path.

The folder is written beside its final name and renamed into place by `close()`, so an
interrupted run leaves no half-written dump under that name; an existing folder is never
replaced unless `overwrite=True` and it is a dump this module wrote.
"""

import json
import os
import re
import shutil

import numpy as np

__all__ = ["Dumper", "hook_modules"]

FORMAT = "layerscope-npy"
VERSION = 1
_MARKER = ".layerscope-dump.json"
_LAYOUTS = ("token-first", "heads-first", "transposed", "ggml")


def _as_numpy(value):
    """A NumPy array from a NumPy array, a PyTorch tensor (any device, bfloat16 included) or a list."""
    if hasattr(value, "detach"):  # torch.Tensor, without importing torch
        value = value.detach()
        if str(value.dtype) in ("torch.bfloat16", "torch.float16"):
            value = value.float()
        value = value.cpu().numpy()
    array = np.asarray(value)
    if array.dtype == np.float16 or array.dtype == np.float32 or array.dtype == np.float64:
        return np.ascontiguousarray(array)
    if array.dtype == np.int32 or array.dtype == np.int64:
        return np.ascontiguousarray(array)
    if np.issubdtype(array.dtype, np.floating):
        return np.ascontiguousarray(array, dtype=np.float32)
    if np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_:
        return np.ascontiguousarray(array, dtype=np.int64)
    raise TypeError(f"cannot dump an array of dtype {array.dtype}: use a float or integer array")


def _to_token_first(array, layout, name):
    if layout == "token-first" or layout == "ggml":
        return array
    if layout == "transposed":
        if array.ndim != 2:
            raise ValueError(f"{name}: layout 'transposed' needs a 2-D (features, T) array, got shape {array.shape}")
        return np.ascontiguousarray(array.T)
    # heads-first: (n_head, T, head_dim), with an optional leading batch axis of size 1
    if array.ndim == 4 and array.shape[0] == 1:
        array = array[0]
    if array.ndim != 3:
        raise ValueError(f"{name}: layout 'heads-first' needs an (n_head, T, head_dim) array, got shape {array.shape}")
    return np.ascontiguousarray(array.transpose(1, 0, 2))


def _file_stem(index, name, occurrence, decode):
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "tensor"
    stem = f"{index:05d}_{safe[:80]}"
    if occurrence > 1:
        stem += f"_{occurrence}"
    if decode > 0:
        stem += f"_d{decode}"
    return stem


class Dumper:
    """Writes tensors to `path` (a folder that must not exist yet, unless overwrite=True).

    prompt_tokens: the token ids of the prompt, recorded so that `compare -m MODEL` runs the same
    tokens. layout: the default layout of every dump() call.
    """

    def __init__(self, path, prompt_tokens=None, layout="token-first", overwrite=False):
        if layout not in _LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(_LAYOUTS)}, not {layout!r}")
        self.path = os.path.abspath(os.fspath(path))
        self.layout = layout
        self.overwrite = overwrite
        self.prompt_tokens = [int(t) for t in prompt_tokens] if prompt_tokens is not None else None
        self.generated_tokens = []
        self.decode = 0
        self._entries = []
        self._seen = {}
        self._closed = False
        if os.path.lexists(self.path) and not overwrite:
            raise FileExistsError(f"{self.path} exists; pass overwrite=True to replace a dump written by this module")
        parent = os.path.dirname(self.path)
        os.makedirs(parent, exist_ok=True)
        self._staging = os.path.join(parent, f".{os.path.basename(self.path)}.staging.{os.getpid()}")
        if os.path.lexists(self._staging):
            shutil.rmtree(self._staging)
        os.mkdir(self._staging)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self.close()
        else:
            self.abandon()
        return False

    def next_decode(self):
        """Starts the next forward call: the tensors dumped after it belong to decode call d + 1."""
        self.decode += 1
        self._seen = {}

    def generated(self, token):
        """Records a token the engine generated (the manifest's generated_tokens)."""
        self.generated_tokens.append(int(token))

    def dump(self, name, value, layout=None):
        """Writes one tensor under `name`; returns the file it was written to."""
        if self._closed:
            raise RuntimeError("this Dumper is closed")
        if not isinstance(name, str) or not name:
            raise ValueError("a tensor needs a non-empty name")
        layout = layout or self.layout
        if layout not in _LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(_LAYOUTS)}, not {layout!r}")
        array = _to_token_first(_as_numpy(value), layout, name)
        if array.size == 0:
            raise ValueError(f"{name}: the array is empty (shape {array.shape})")
        occurrence = self._seen.get(name, 0) + 1
        self._seen[name] = occurrence
        file = _file_stem(len(self._entries), name, occurrence, self.decode) + ".npy"
        np.save(os.path.join(self._staging, file), array, allow_pickle=False)
        entry = {"name": name, "file": file, "order": "ggml" if layout == "ggml" else "row-major"}
        if occurrence > 1:
            entry["occurrence"] = occurrence
        if self.decode > 0:
            entry["decode"] = self.decode
        self._entries.append(entry)
        return os.path.join(self.path, file)

    def close(self):
        """Writes manifest.json and puts the folder in place."""
        if self._closed:
            return
        if not self._entries:
            self.abandon()
            raise ValueError(f"{self.path}: nothing was dumped")
        manifest = {"format": FORMAT, "version": VERSION, "tensors": self._entries}
        if self.prompt_tokens is not None:
            manifest["prompt_tokens"] = self.prompt_tokens
        if self.generated_tokens:
            manifest["generated_tokens"] = self.generated_tokens
        with open(os.path.join(self._staging, "manifest.json"), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1)
        with open(os.path.join(self._staging, _MARKER), "w", encoding="utf-8") as f:
            json.dump({"format": "layerscope_dump.py", "files": [e["file"] for e in self._entries]}, f)
        if os.path.lexists(self.path):
            if not os.path.isdir(self.path) or os.path.islink(self.path) or not os.path.exists(os.path.join(self.path, _MARKER)):
                self.abandon()
                raise FileExistsError(f"{self.path} exists and is not a dump written by this module; not replaced")
            old = self._staging + ".old"
            os.rename(self.path, old)
            os.rename(self._staging, self.path)
            shutil.rmtree(old)
        else:
            os.rename(self._staging, self.path)
        self._closed = True

    def abandon(self):
        """Removes what was written; nothing is put in place."""
        if os.path.isdir(self._staging):
            shutil.rmtree(self._staging)
        self._closed = True


def hook_modules(model, dumper, include=None):
    """Registers a forward hook on every named submodule of a PyTorch `model` (those whose name
    matches the regular expression `include`, if given) that dumps the module's output under its
    module path. Returns the hook handles; call `.remove()` on each when done. Outputs that are
    tuples dump their first element (the hidden state of a decoder layer)."""
    pattern = re.compile(include) if include else None
    handles = []
    for name, module in model.named_modules():
        if not name or (pattern and not pattern.search(name)):
            continue

        def hook(_module, _inputs, output, name=name):
            if isinstance(output, (tuple, list)):
                output = output[0]
            if hasattr(output, "shape"):
                dumper.dump(name, output)

        handles.append(module.register_forward_hook(hook))
    return handles
