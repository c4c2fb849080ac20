"""benchmarks/config_walk.py measures what it says: the stops, the returns."""

import os
import tempfile

import pytest
from absl.testing import absltest

from benchmarks import config_walk
from tests.tiny import tiny_config
from train.loop import settings
from train.loop import trainer
from train.objective import schedules

_SETTINGS = "train/loop/settings.py"


class ReturnsTest(absltest.TestCase):

  def test_counts_a_stop_in_a_module_left_earlier(self):
    stops = lambda *modules: [(m, "f") for m in modules]
    self.assertEqual(config_walk.returns(stops("a", "a", "b", "b", "c")), 0)
    self.assertEqual(config_walk.returns(stops("a", "b", "a")), 1)
    # Each coming back counts, staying does not.
    self.assertEqual(config_walk.returns(stops("a", "b", "a", "a", "b")), 2)
    self.assertEqual(config_walk.returns(stops("a", "b", "c", "b", "a")), 2)
    self.assertEqual(config_walk.returns([]), 0)


class WalkTest(absltest.TestCase):

  def test_stops_of_the_data_free_checks(self):
    # Handed the config or a section (check_config, check, of, the
    # builders' checks), or called by code that holds it with what it read
    # there (the schedules stages.check builds to validate them).
    stops = config_walk.walk(
        lambda: settings.check_config(tiny_config(), num_devices=1))
    self.assertEqual(stops, [
        (_SETTINGS, "check_config"), (_SETTINGS, "check"), (_SETTINGS, "of"),
        ("train/data/training_data.py", "check"),
        ("train/models.py", "check"),
        ("train/objective/stages.py", "check"),
        ("train/objective/schedules.py", "learning_rate"),
        ("train/objective/schedules.py", "learning_rate")])
    self.assertEqual(config_walk.returns(stops), 0)

  def test_code_that_never_holds_the_config_is_no_stop(self):
    self.assertEqual(config_walk.walk(lambda: schedules.learning_rate(
        "constant", base=1.0, steps_per_epoch=1, num_epochs=1)), [])

  @pytest.mark.integration
  def test_a_run_flows_down(self):
    # The walk of the whole program (benchmarks/config_walk.py runs it on
    # configs/default.py): it never comes back to the entry point, and
    # returns to a module already left at most 8 times.
    config = tiny_config(num_epochs=1)
    with tempfile.TemporaryDirectory() as workdir:
      stops = config_walk.walk(lambda: trainer.train_and_evaluate(
          config, os.path.join(workdir, "w")))
    modules = [m for m, _ in stops]
    self.assertEqual(stops[0],
                     ("train/loop/trainer.py", "train_and_evaluate"))
    self.assertEqual(modules.count("train/loop/trainer.py"), 1)
    self.assertEqual(stops[-1], ("train/loop/epochs.py", "train"))
    self.assertLessEqual(config_walk.returns(stops), 8, stops)


if __name__ == "__main__":
  absltest.main()
