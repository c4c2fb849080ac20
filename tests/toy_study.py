"""A toy study for the runner's tests: 14 runs of seconds each.

    python -m experiments --study=tests/toy_study.py --root=/tmp/toy --out=/tmp/toy_out
"""

from experiments import study as s

_TINY = {
    "num_epochs": 2, "batch_size": 64, "eval_batch_size": 200,
    "dataset.train_size": 256, "dataset.val_size": 200,
    "model.name": "mlp", "model.width": 32,
    # As tests/tiny.py: no pass over the training set at each new best.
    "label_issues": False,
}


def get_study():
  return s.Study(
      name="toy",
      title="Toy study",
      settings=(s.Setting("m1d_sym40", "mnist1d.py:noise=0.4", _TINY,
                          label="MNIST-1D, 40 % symmetric"),),
      methods=(
          # 1e30 diverges: a result that selection passes over.
          s.Method("ce", {"loss.name": "cross_entropy"},
                   grid={"optimizer.learning_rate": (0.05, 0.1, 1e30)}),
          s.Method("el_at_ce", {"loss.name": "encouraging"},
                   inherit_from="ce",
                   inherit_keys=("optimizer.learning_rate",)),
          # T estimated from ce's run of the same seed.
          s.Method("fc_est", {"loss.name": "forward_correction"},
                   grid={"optimizer.learning_rate": (0.1,)},
                   transition_from="ce"),
      ),
      baseline="ce",
      claims=(s.Claim("EL beats CE", "toy", "el_at_ce", "ce"),
              # Primary: the sensitivity panel reads it at ce's neighbouring
              # rates (fc_est tunes one), 4 runs of ce.
              s.Claim("FC beats CE", "toy", "fc_est", "ce", primary=True)),
      tune_seeds=(0,),
      # Two: the claim's interval over seeds and test examples needs both.
      final_seeds=(1, 2),
      sensitivity_seeds=2,
      figures=("scores", "grad_by_confidence"),
  )
