"""The project's modules import one another without a circle; its text
files hold no stray control character."""

import ast
import os

from absl.testing import absltest

from tests.tiny import ROOT

PACKAGES = ("losses", "train", "experiments", "benchmarks", "configs")


def _modules() -> dict[str, str]:
  """Dotted name -> path of every module of the project's packages."""
  out = {}
  for package in PACKAGES:
    for folder, _, files in os.walk(os.path.join(ROOT, package)):
      for name in files:
        if name.endswith(".py"):
          path = os.path.join(folder, name)
          dotted = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
          out[dotted.removesuffix(".__init__")] = path
  return out


def import_graph() -> dict[str, set[str]]:
  """Module -> the project's modules it imports (anywhere in its body).

  ``from a import b`` names module ``a.b`` where that is a module, else
  ``a``: a submodule's ``from losses import _apply`` depends on
  ``losses._apply``, not on the package that imports it back.
  """
  modules = _modules()
  graph = {}
  for name, path in modules.items():
    with open(path) as f:
      tree = ast.parse(f.read())
    deps = set()
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        deps.update(a.name for a in node.names)
      elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        for a in node.names:
          sub = f"{node.module}.{a.name}"
          deps.add(sub if sub in modules else node.module)
    graph[name] = {d for d in deps if d in modules and d != name}
  return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
  """The strongly connected groups of more than one module (Tarjan)."""
  index, low, stack, on_stack, found = {}, {}, [], set(), []

  def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on_stack.add(v)
    for w in sorted(graph[v]):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on_stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      group = []
      while True:
        w = stack.pop()
        on_stack.discard(w)
        group.append(w)
        if w == v:
          break
      if len(group) > 1:
        found.append(sorted(group))

  for v in sorted(graph):
    if v not in index:
      visit(v)
  return found


class ImportsTest(absltest.TestCase):

  def test_no_import_circle(self):
    self.assertEqual(circles(import_graph()), [])

  def test_a_circle_is_found(self):
    self.assertEqual(circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}),
                     [["a", "b", "c"]])


class TextTest(absltest.TestCase):

  def test_no_control_character_in_docs_and_sources(self):
    # A "\a" or "\r" typed into a LaTeX string ("\approx", "\rangle")
    # becomes a bell or a carriage return and breaks the formula.
    paths = [os.path.join(ROOT, "README.md")] + [
        os.path.join(folder, name)
        for top in ("docs",) + PACKAGES
        for folder, _, files in os.walk(os.path.join(ROOT, top))
        for name in files if name.endswith((".md", ".py"))]
    bad = []
    for path in paths:
      with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
          if any(ord(c) < 32 and c not in "\t\n" for c in line):
            bad.append(f"{os.path.relpath(path, ROOT)}:{number}")
    self.assertEqual(bad, [])


if __name__ == "__main__":
  absltest.main()
