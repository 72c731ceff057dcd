#!/usr/bin/env python3
"""The Python dumper (assets/python/layerscope_dump.py) as an engine author uses it.

An "engine" here replays llama.cpp's own stories260K tensors (exported from the fixture dump),
holds them as PyTorch/NumPy engines do (token-first, queries heads-first) and dumps them under
Hugging Face module names with the dumper. `layerscope compare` must pair the dump with llama.cpp's
dump without any renaming and pass it; the same dump with one planted bug must diverge at exactly
that tensor; a dump whose names pair with nothing must exit 2.

    test_layerscope_dump.py LAYERSCOPE_BINARY FIXTURES_DIR
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "assets", "python"))
import layerscope_dump  # noqa: E402

LAYERSCOPE = sys.argv[1] if len(sys.argv) > 1 else ""
FIXTURES = sys.argv[2] if len(sys.argv) > 2 else ""
DUMP = os.path.join(FIXTURES, "dumps", "stories260K_once_n0_fa-off.gguf")
MODEL = os.path.join(FIXTURES, "models", "stories260K.gguf")

# llama.cpp's name (base, occurrence) -> the Hugging Face module whose output it is (llama: the
# q/k/v projections are the first occurrence, before the reshape into heads).
HF = [("embd", 1, "model.embed_tokens")]
for n in range(5):
    p = f"model.layers.{n}"
    HF += [
        (f"attn_norm-{n}", 1, f"{p}.input_layernorm"),
        (f"Qcur-{n}", 1, f"{p}.self_attn.q_proj"),
        (f"Kcur-{n}", 1, f"{p}.self_attn.k_proj"),
        (f"Vcur-{n}", 1, f"{p}.self_attn.v_proj"),
        (f"attn_out-{n}", 1, f"{p}.self_attn.o_proj"),
        (f"ffn_norm-{n}", 1, f"{p}.post_attention_layernorm"),
        (f"ffn_gate-{n}", 1, f"{p}.mlp.gate_proj"),
        (f"ffn_up-{n}", 1, f"{p}.mlp.up_proj"),
        (f"ffn_out-{n}", 1, f"{p}.mlp.down_proj"),
        (f"l_out-{n}", 1, p),
    ]
HF += [("result_norm", 1, "model.norm"), ("result_output", 1, "lm_head")]


def run(*args):
    r = subprocess.run([LAYERSCOPE, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    return r.returncode, r.stdout


@unittest.skipUnless(LAYERSCOPE and os.path.isfile(DUMP) and os.path.isfile(MODEL),
                     "needs the layerscope binary and ../shared/fixtures (stories260K)")
class EngineDumps(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="layerscope-pydump-")
        cls.llama = os.path.join(cls.tmp, "llama")
        code, out = run("export", "--from", DUMP, "--npy", cls.llama)
        assert code == 0, out
        with open(os.path.join(cls.llama, "manifest.json"), encoding="utf-8") as f:
            manifest = json.load(f)
        cls.prompt = manifest.get("prompt_tokens")
        cls.tensors = {}
        for e in manifest["tensors"]:
            name = e["name"]
            occurrence = e.get("occurrence", 1)
            if "#" in name:
                name, k = name.split("#", 1)
                occurrence = int(k.split("@")[0])
            cls.tensors[(name.split("@")[0], occurrence)] = np.load(os.path.join(cls.llama, e["file"]))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def engine_dump(self, path, plant=None, names=HF):
        """Dumps the engine's tensors under `names`; `plant` (a module name) gets a bug."""
        with layerscope_dump.Dumper(path, prompt_tokens=self.prompt) as d:
            for base, occurrence, module in names:
                x = self.tensors[(base, occurrence)].astype(np.float32)  # numpy (T, features)
                x = x[np.newaxis]  # (1, T, features), as a batch of one
                if module == plant:
                    x = x * 1.5
                d.dump(module, x)
        return path

    def test_pairs_hugging_face_names_and_passes(self):
        path = self.engine_dump(os.path.join(self.tmp, "clean"))
        code, out = run("compare", path, DUMP)
        self.assertEqual(code, 0, out)
        self.assertIn(f"{len(HF)} compared", out)

    def test_a_planted_bug_diverges_at_its_tensor(self):
        path = self.engine_dump(os.path.join(self.tmp, "planted"), plant="model.layers.2.post_attention_layernorm")
        code, out = run("compare", path, DUMP, "--json")
        self.assertEqual(code, 1, out)
        first = json.loads(out)["first_divergence"]
        self.assertIn("model.layers.2.post_attention_layernorm", json.dumps(first))
        self.assertIn("ffn_norm-2", json.dumps(first))

    def test_the_gui_pairs_it_too(self):
        """`layerscope my_dump -r llama.gguf -m model.gguf` opens the same comparison in the GUI."""
        xvfb = shutil.which("xvfb-run")
        if not xvfb:
            self.skipTest("needs xvfb-run for the GUI")
        path = self.engine_dump(os.path.join(self.tmp, "gui"), plant="model.layers.2.post_attention_layernorm")
        script = os.path.join(self.tmp, "gui.script")
        log = os.path.join(self.tmp, "gui.log")
        with open(script, "w", encoding="utf-8") as f:
            f.write("wait\nframes 2\nquit\n")
        r = subprocess.run([xvfb, "-a", "-s", "-screen 0 1280x800x24", LAYERSCOPE, path, "-r", DUMP, "-m", MODEL,
                            "--script", script, "--state-log", log],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        if "has no GUI" in r.stdout:
            self.skipTest("this build has no GUI")
        self.assertEqual(r.returncode, 0, r.stdout)
        with open(log, encoding="utf-8") as f:
            state = f.read()
        self.assertIn("ok opened", state)
        self.assertIn("first_divergent 26", state)  # ffn_norm-2 under its Hugging Face name

    def test_heads_first_queries_are_permuted(self):
        path = os.path.join(self.tmp, "heads")
        with layerscope_dump.Dumper(path, prompt_tokens=self.prompt) as d:
            roped = self.tensors[("Qcur-0", 3)]  # numpy (T, n_head, head_dim)
            d.dump("q_roped", np.ascontiguousarray(roped.transpose(1, 0, 2)), layout="heads-first")
        back = np.load(os.path.join(path, sorted(f for f in os.listdir(path) if f.endswith(".npy"))[0]))
        np.testing.assert_array_equal(back, roped)

    def test_names_that_pair_with_nothing_exit_2(self):
        names = [(b, o, f"engine.tensor{i}") for i, (b, o, _) in enumerate(HF)]
        path = self.engine_dump(os.path.join(self.tmp, "unknown"), names=names)
        code, out = run("compare", path, DUMP)
        self.assertEqual(code, 2, out)
        self.assertIn("engine.tensor0", out)

    def test_an_existing_folder_is_never_replaced_unless_ours(self):
        path = os.path.join(self.tmp, "precious")
        os.mkdir(path)
        with open(os.path.join(path, "notes.txt"), "w", encoding="utf-8") as f:
            f.write("mine")
        with self.assertRaises(FileExistsError):
            layerscope_dump.Dumper(path)
        d = layerscope_dump.Dumper(path, overwrite=True)
        d.dump("x", np.ones((2, 4), np.float32))
        with self.assertRaises(FileExistsError):
            d.close()
        self.assertEqual(os.listdir(path), ["notes.txt"])
        self.assertEqual([f for f in os.listdir(self.tmp) if "staging" in f], [])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
