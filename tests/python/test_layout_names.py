"""The dump-folder names (docs/method.md §1.1): attention_plasticity.layout, Python's one home of
the format, gives for every name of tests/data/dump_folder_names.txt what the list says, as the
C++ reader does (tests/run/test_dump_folder.cpp reads the same list). The module is loaded from the
source tree (it imports nothing but re), so any Python runs this.

Run: python3 tests/python/test_layout_names.py -v   (or with pytest)
"""

import importlib.util
import os
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMES = os.path.join(ROOT, "tests", "data", "dump_folder_names.txt")


def load_layout():
    path = os.path.join(ROOT, "python", "attention_plasticity", "layout.py")
    spec = importlib.util.spec_from_file_location("ap_layout_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shared_names():
    """(name, expected result) of every line of the shared list."""
    out = []
    with open(NAMES, encoding="utf-8") as f:
        for line in f.read().split("\n"):
            if not line or line.startswith("#"):
                continue
            name, expected = line.split("\t", 1)
            out.append((name, expected))
    return out


class SharedNames(unittest.TestCase):
    def setUp(self):
        self.layout = load_layout()

    def result(self, name):
        try:
            parsed = self.layout.parse_head_folder(name)
        except ValueError as exc:
            return f"problem: {exc}"
        if parsed is None:
            return "none"
        layer, head, kind = parsed
        self.assertEqual(self.layout.head_folder(layer, head, kind), name)  # written back the same
        return f"head {layer} {head} {kind}"

    def test_every_name_of_the_list(self):
        names = shared_names()
        self.assertGreaterEqual(len(names), 30)
        for name, expected in names:
            with self.subTest(name=name):
                self.assertEqual(self.result(name), expected)

    def test_the_scripts_use_the_one_home(self):
        """examples/capture_qk.py and examples/convert_sniffed_qk.py hold no pattern of their own."""
        for script in ("capture_qk.py", "convert_sniffed_qk.py"):
            with open(os.path.join(ROOT, "examples", script), encoding="utf-8") as f:
                text = f.read()
            with self.subTest(script=script):
                self.assertFalse("re.compile(r\"^l(" in text, "a pattern of its own")
                self.assertTrue("attention_plasticity.layout" in text, "does not use the one home")


if __name__ == "__main__":
    unittest.main()
