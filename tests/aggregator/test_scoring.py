"""One round's arithmetic (no chain): evaluation on the validation set, aggregation, the chain's measurements."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from fedchain.aggregator.checkpoint import load_strategy_state, save_strategy_state
from fedchain.aggregator.scoring import (
    ClientInput,
    Evaluator,
    check_supported,
    quality_source,
    score_round,
    task_strategy,
)
from fedchain.errors import AgentError, ConfigError
from fedchain.fl.aggregation import MEAN, AggregationConfig
from fedchain.fl.divergence import loss_kl
from fedchain.fl.quality import to_wad
from fedchain.fl.registry import get_strategy
from fedchain.fl.screening import NO_SCREENING, ScreeningConfig, ScreeningReason
from fedchain.fl.strategies.cgsv import CGSVState
from fedchain.fl.strategies.fair import FairState
from fedchain.fl.strategy import StrategyState
from fedchain.taskspec import TaskSpec, ValidationSpec, load_validation
from fedchain.trainer.evaluation import predict
from fedchain.trainer.trainer import initial_params
from tests.support import present

SPEC = TaskSpec(dataset="mnist", model="lenet5", validation=ValidationSpec(size=100, seed=3))


@pytest.fixture(scope="module")
def evaluator() -> Evaluator:
    return Evaluator(SPEC.model_spec(), load_validation(SPEC))


def test_fedavg_round_weights_accepted_updates_by_data_size_and_scores_loss_ratios(evaluator: Evaluator) -> None:
    # prepare: two usable updates (data sizes 100 and 300) and a rejected one that arrived at t = 7 s
    g = initial_params(SPEC.model_spec(), seed=0)
    generator = torch.Generator().manual_seed(0)
    u0, u1 = (torch.randn(g.numel(), generator=generator) * 0.01 for _ in range(2))
    clients = [ClientInput(u0, 100, 11), ClientInput(u1, 300, 12), ClientInput(None, 500, 7)]

    # execute
    outcome = score_round(
        get_strategy("fedavg"),
        g,
        clients,
        evaluator,
        None,
        quality="loss",
        quality_floor=0.0,
        data_credit=1.0,
        grace=None,
    )

    # assert: g + 1/4 u0 + 3/4 u1; q_i = mean(L0, L1) / L_i from losses computed here independently
    torch.testing.assert_close(outcome.global_params, g + 0.25 * u0 + 0.75 * u1)
    losses = predict(SPEC.model_spec(), torch.stack([g + u0, g + u1]), evaluator.dataset).mean_losses.tolist()
    mean = (losses[0] + losses[1]) / 2
    assert outcome.qualities[:2] == pytest.approx([mean / losses[0], mean / losses[1]], rel=1e-12)
    assert [m.accepted for m in outcome.measurements] == [True, True, False]
    assert [m.round_time for m in outcome.measurements] == [11, 12, 7]
    assert outcome.measurements[2].quality == 0
    assert [m.quality for m in outcome.measurements[:2]] == list(to_wad(outcome.qualities[:2]))
    accuracy = predict(SPEC.model_spec(), outcome.global_params, evaluator.dataset).accuracies[0]
    assert outcome.accuracy == pytest.approx(float(accuracy))


def test_round_without_usable_updates_keeps_the_model_and_scores_nobody(evaluator: Evaluator) -> None:
    g = initial_params(SPEC.model_spec(), seed=1)
    clients = [ClientInput(None, 10, 5), ClientInput(None, 10, None, active=False)]

    outcome = score_round(
        get_strategy("fedavg"), g, clients, evaluator, None, quality_floor=0.0, data_credit=1.0, grace=None
    )

    assert torch.equal(outcome.global_params, g)
    assert [(m.quality, m.round_time, m.accepted) for m in outcome.measurements] == [(0, 5, False), (0, 0, False)]


def test_contribution_quality_is_rescaled_to_mean_one_over_accepted_clients(evaluator: Evaluator) -> None:
    # prepare: three updates around one direction, as trained ones are (three random directions agree on
    # nothing, and screening drops them all)
    g = initial_params(SPEC.model_spec(), seed=2)
    generator = torch.Generator().manual_seed(1)
    common = torch.randn(g.numel(), generator=generator) * 0.01
    updates = [common + 0.005 * torch.randn(g.numel(), generator=generator) for _ in range(3)]
    clients = [ClientInput(u, 100, 3) for u in updates]

    outcome = score_round(
        get_strategy("cgsv"),
        g,
        clients,
        evaluator,
        None,
        quality="contribution",
        quality_floor=0.0,
        data_credit=1.0,
        grace=None,
    )

    assert sum(outcome.qualities) == pytest.approx(3.0)
    assert isinstance(outcome.state, CGSVState) and outcome.state.round == 1


def test_the_posted_contribution_quality_of_a_client_with_a_fifth_of_the_mean_data_gets_the_credit_4(
    evaluator: Evaluator,
) -> None:
    # prepare: the same three updates as above; client 0 holds 100 samples, the others 700 (mean 500)
    g = initial_params(SPEC.model_spec(), seed=2)
    generator = torch.Generator().manual_seed(1)
    common = torch.randn(g.numel(), generator=generator) * 0.01
    updates = [common + 0.005 * torch.randn(g.numel(), generator=generator) for _ in range(3)]
    clients = [ClientInput(u, size, 3) for u, size in zip(updates, [100, 700, 700], strict=True)]

    def scored(credit: float) -> tuple[float, ...]:
        cgsv = get_strategy("cgsv")
        return score_round(
            cgsv, g, clients, evaluator, None, quality="contribution", quality_floor=0.0, data_credit=credit, grace=None
        ).qualities

    plain, credited = scored(1.0), scored(4.0)

    assert credited[0] == pytest.approx(4.0 * plain[0]) and credited[1:] == plain[1:]


def test_quality_source_defaults_to_contribution_only_for_contribution_strategies() -> None:
    assert [quality_source(name) for name in ("fedavg", "quality", "cgsv", "fedfaim", "fedave")] == [
        "loss",
        "loss",
        "contribution",
        "contribution",
        "contribution",
    ]
    assert quality_source("cgsv", "loss") == "loss"
    with pytest.raises(ConfigError):
        quality_source("fedavg", "median")  # type: ignore[arg-type]


def test_the_simulation_scores_every_strategy_by_the_quality_the_aggregator_posts() -> None:
    from fedchain.experiments import runner
    from fedchain.fl.registry import get_strategy, strategy_names

    assert {name: runner.quality_source(get_strategy(name)) for name in strategy_names()} == {
        name: quality_source(name) for name in strategy_names()
    }
    assert {name for name in strategy_names() if quality_source(name) == "contribution"} == {
        "cgsv",
        "fedfaim",
        "fedave",
        "fair",
    }


def test_fedave_is_refused_for_a_task_whose_fog_nodes_ship_no_local_losses() -> None:
    fedave = get_strategy("fedave")

    with pytest.raises(ConfigError, match="local losses") as caught:
        check_supported(fedave, SPEC)  # a fedavg task: its updates carry no local losses

    assert "strategy 'fedave'" in caught.value.hint
    check_supported(fedave, dataclasses.replace(SPEC, strategy="fedave"))
    check_supported(get_strategy("cgsv"), SPEC)


def test_the_task_strategy_masks_rewards_per_layer_of_the_tasks_model_as_simulate_does() -> None:
    sizes = SPEC.param_spec().sizes

    for name in ("fedave", "fair"):
        strategy = task_strategy(name, {}, dataclasses.replace(SPEC, strategy=name))
        assert strategy.layer_sizes == sizes, name  # type: ignore[attr-defined]
    given = task_strategy("fair", {"layer_sizes": (sum(sizes),)}, dataclasses.replace(SPEC, strategy="fair"))
    assert given.layer_sizes == (sum(sizes),)  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="local losses"):
        task_strategy("fedave", {}, SPEC)  # checked against what the task's updates carry


def test_fedave_round_scores_the_discounted_accuracy_of_the_shipped_local_losses_and_drops_an_update_without_them(
    evaluator: Evaluator,
) -> None:
    # prepare: two updates with local losses (data sizes 100 and 300), a third whose losses are missing
    g = initial_params(SPEC.model_spec(), seed=4)
    generator = torch.Generator().manual_seed(4)
    u0, u1, u2 = (torch.randn(g.numel(), generator=generator) * 0.01 for _ in range(3))
    local = [torch.rand(50, generator=generator) * 3, torch.rand(80, generator=generator) + 2]
    clients = [
        ClientInput(u0, 100, 4, local_losses=local[0]),
        ClientInput(u1, 300, 5, local_losses=local[1]),
        ClientInput(u2, 100, 6),
    ]
    fedave = get_strategy("fedave", tau=0.5)  # a fixed length: the step below is worked by hand
    seed = get_strategy("fedave", tau=0.5, contribution_measure="reputation")

    # execute
    outcome, seeds = (
        score_round(
            s,
            g,
            clients,
            evaluator,
            None,
            quality=quality_source("fedave"),
            quality_floor=0.0,
            data_credit=1.0,
            grace=None,
        )
        for s in (fedave, seed)
    )

    # assert: from an independent evaluation, c_i = Acc_i (min KL / KL_i) ** 0.25 with KL_i at least kl_floor, and the
    # seed's r~_i = Acc_i / KL_i; q = c (or r) rescaled to mean 1
    predicted = predict(SPEC.model_spec(), torch.stack([g + u0, g + u1]), evaluator.dataset)
    kl = [max(loss_kl(local[i], predicted.losses[i]), fedave.kl_floor) for i in (0, 1)]
    discounted = [float(predicted.accuracies[i]) * (min(kl) / kl[i]) ** 0.25 for i in (0, 1)]
    instant = [float(predicted.accuracies[i]) / kl[i] for i in (0, 1)]
    assert outcome.qualities[:2] == pytest.approx([2 * c / sum(discounted) for c in discounted], rel=1e-9)
    assert seeds.qualities[:2] == pytest.approx([2 * r / sum(instant) for r in instant], rel=1e-9)
    assert [m.accepted for m in outcome.measurements] == [True, True, False] and outcome.qualities[2] == 0
    step = 0.25 * u0 / u0.norm() + 0.75 * u1 / u1.norm()
    torch.testing.assert_close(outcome.global_params, g + fedave.tau * step)


def test_strategy_state_checkpoint_round_trips_tensors_none_and_counters(tmp_path: Path) -> None:
    state = CGSVState(round=4, weights=torch.tensor([0.25, 0.75], dtype=torch.float64))

    save_strategy_state(tmp_path, 4, state)
    loaded = load_strategy_state(tmp_path, 4, CGSVState)

    assert loaded is not None and loaded.round == 4 and torch.equal(present(loaded.weights), present(state.weights))
    assert load_strategy_state(tmp_path, 5, CGSVState) is None
    save_strategy_state(tmp_path, 1, CGSVState(round=1))
    assert load_strategy_state(tmp_path, 1, CGSVState) == CGSVState(round=1, weights=None)
    with pytest.raises(AgentError, match="StrategyState"):
        load_strategy_state(tmp_path, 4, StrategyState)  # a CGSV checkpoint is not a plain state


def test_a_screened_out_update_is_scored_as_rejected_and_moves_no_honest_quality(evaluator: Evaluator) -> None:
    # prepare: four small updates in one direction and the same round with a fifth client scaling one x1000
    g = initial_params(SPEC.model_spec(), seed=5)
    generator = torch.Generator().manual_seed(5)
    common = torch.randn(g.numel(), generator=generator) * 0.01
    honest = [common + 0.005 * torch.randn(g.numel(), generator=generator) for _ in range(4)]
    clients = [ClientInput(u, 100, 3) for u in honest]
    attacked = [*clients, ClientInput(1000 * honest[0], 100, 3)]

    # execute
    alone = score_round(
        get_strategy("quality"), g, clients, evaluator, None, quality_floor=0.0, data_credit=1.0, grace=None
    )
    outcome = score_round(
        get_strategy("quality"), g, attacked, evaluator, None, quality_floor=0.0, data_credit=1.0, grace=None
    )

    # assert: the attacker is rejected with quality 0 on chain, the honest clients score as without it
    assert outcome.screening is not None and outcome.screening.rejected() == {4: ScreeningReason.NORM_TOO_LARGE}
    assert [m.accepted for m in outcome.measurements] == [True] * 4 + [False]
    assert outcome.measurements[4].quality == 0
    assert outcome.qualities[:4] == pytest.approx(alone.qualities, rel=1e-12)
    torch.testing.assert_close(outcome.global_params, alone.global_params)


def test_a_client_that_resends_the_last_global_step_is_scored_as_rejected(evaluator: Evaluator) -> None:
    # prepare: round 2; four clients learn something new together (a shared direction beyond the last step, plus
    # their own noise), the fifth trains nothing and resends the last step plus noise (a self-trained client's
    # disguised free ride: no fog node, no re-execution, the scoring every agent shares must catch it)
    g = initial_params(SPEC.model_spec(), seed=8)
    generator = torch.Generator().manual_seed(8)
    last_step = torch.randn(g.numel(), generator=generator) * 0.01
    new = torch.randn(g.numel(), generator=generator) * 0.01
    honest = [0.5 * last_step + new + 0.01 * torch.randn(g.numel(), generator=generator) for _ in range(4)]
    rider = last_step + 0.5 * 0.01 * torch.randn(g.numel(), generator=generator)

    # execute
    outcome = score_round(
        get_strategy("quality"),
        g,
        [ClientInput(u, 100, 3) for u in [*honest, rider]],
        evaluator,
        None,
        last_step=last_step,
        quality_floor=0.2,
        data_credit=1.0,
        grace=None,
    )

    # assert: quality 0 and not accepted on chain, the honest four accepted
    assert outcome.screening is not None and outcome.screening.rejected() == {4: ScreeningReason.STALE}
    assert [m.accepted for m in outcome.measurements] == [True] * 4 + [False]
    assert outcome.measurements[4].quality == 0


def test_screening_follows_the_config_it_is_given(evaluator: Evaluator) -> None:
    g = initial_params(SPEC.model_spec(), seed=6)
    generator = torch.Generator().manual_seed(6)
    updates = [torch.randn(g.numel(), generator=generator) * 0.01 for _ in range(3)]
    clients = [ClientInput(u, 100, 3) for u in [*updates, -100 * updates[0]]]

    outcome = score_round(
        get_strategy("fedavg"),
        g,
        clients,
        evaluator,
        None,
        screening=NO_SCREENING,
        quality_floor=0.0,
        data_credit=1.0,
        grace=None,
    )

    assert all(m.accepted for m in outcome.measurements)


def test_the_task_spec_carries_its_screening_rules_through_its_bytes_for_the_auditor() -> None:
    spec = dataclasses.replace(SPEC, screening=ScreeningConfig(min_cosine=0.1, max_loss_ratio=None))

    again = TaskSpec.from_bytes(spec.to_bytes())

    assert again.screening == ScreeningConfig(min_cosine=0.1, max_loss_ratio=None)
    assert TaskSpec.from_bytes(SPEC.to_bytes()).screening == ScreeningConfig()
    assert spec.dataset_id != SPEC.dataset_id  # other rules, another task


def test_a_fair_round_of_the_running_system_keeps_fedavgs_model_and_a_state_that_checkpoints(
    evaluator: Evaluator, tmp_path: Path
) -> None:
    # prepare: two updates with local losses (data sizes 100 and 300)
    g = initial_params(SPEC.model_spec(), seed=5)
    generator = torch.Generator().manual_seed(5)
    u0, u1 = (torch.randn(g.numel(), generator=generator) * 0.01 for _ in range(2))
    local = [torch.rand(50, generator=generator) * 3, torch.rand(80, generator=generator) + 2]
    clients = [ClientInput(u0, 100, 4, local_losses=local[0]), ClientInput(u1, 300, 5, local_losses=local[1])]
    fair = get_strategy("fair")

    # execute
    outcome = score_round(
        fair,
        g,
        clients,
        evaluator,
        None,
        quality=quality_source("fair"),
        quality_floor=0.0,
        data_credit=1.0,
        grace=None,
    )
    save_strategy_state(tmp_path, 1, present(outcome.state))
    loaded = load_strategy_state(tmp_path, 1, fair.state_type)

    # assert
    torch.testing.assert_close(outcome.global_params, g + 0.25 * u0 + 0.75 * u1)
    assert quality_source("fair") == "contribution" and all(m.accepted for m in outcome.measurements)
    assert loaded is not None and torch.equal(present(loaded.initial), g)
    assert isinstance(outcome.state, FairState)
    assert torch.equal(present(loaded.signal_sum), present(outcome.state.signal_sum))


#: A spec's bytes as written before screening had ``min_agreement`` and specs had ``aggregation``.
LEGACY_SPEC_BYTES = (
    b'{"batch_size":10,"dataset":"mnist","format":"fedchain-taskspec/1","in_channels":1,"local_epochs":1,"lr":0.1,'
    b'"model":"lenet5","momentum":0.0,"num_classes":10,"privacy_delta":1e-05,"privacy_epsilon":null,'
    b'"privacy_mechanism":"laplace","screening":{"clip_to_median_norm":false,"enabled":true,"max_loss_ratio":5.0,'
    b'"max_norm_ratio":4.0,"min_cosine":-0.3,"min_norm_ratio":0.1,"min_updates":3},"seed":0,"strategy":"fedavg",'
    b'"strategy_options":{},"validation":{"seed":0,"size":1000,"split":"test"}}'
)


def test_a_spec_written_before_the_agreement_rule_and_aggregation_keeps_its_bytes_and_its_rules() -> None:
    spec = TaskSpec.from_bytes(LEGACY_SPEC_BYTES)

    assert spec.to_bytes() == LEGACY_SPEC_BYTES  # so its datasetId, the store key, is unchanged
    assert spec.screening.min_agreement is None  # its aggregator did not run the rule: the auditor must not either
    assert spec.screening.reassess_agreement is False
    assert spec.screening.min_novelty is None  # nor the novelty rule
    assert (spec.screening.max_norm_ratio, spec.screening.max_loss_ratio) == (4.0, 5.0)  # its thresholds, not today's
    assert spec.aggregation == MEAN
    assert TaskSpec(dataset="mnist", model="lenet5").screening.min_agreement == ScreeningConfig().min_agreement


def test_a_spec_written_before_the_agreement_rules_second_look_keeps_its_bytes_and_its_single_look() -> None:
    today = TaskSpec(dataset="mnist", model="lenet5").to_bytes()
    assert b'"min_agreement":3.0,' in today and b',"reassess_agreement":true' in today
    before = today.replace(b'"min_agreement":3.0,', b'"min_agreement":4.0,').replace(b',"reassess_agreement":true', b"")

    spec = TaskSpec.from_bytes(before)

    assert spec.to_bytes() == before
    assert (spec.screening.min_agreement, spec.screening.reassess_agreement) == (4.0, False)


def test_the_task_spec_carries_its_aggregation_rule_to_every_strategy_it_builds() -> None:
    spec = dataclasses.replace(SPEC, aggregation=AggregationConfig(rule="median"))

    again = TaskSpec.from_bytes(spec.to_bytes())

    assert again.aggregation == AggregationConfig(rule="median")
    assert again.strategy_instance().aggregation.rule == "median"
    assert again.strategy_named("quality").aggregation.rule == "median"
    assert spec.dataset_id != SPEC.dataset_id
    with pytest.raises(ConfigError, match="plain mean"):
        dataclasses.replace(SPEC, strategy="cgsv", aggregation=AggregationConfig(rule="median"))


def test_the_grace_memory_travels_in_the_outcomes_state_from_round_to_round(evaluator: Evaluator) -> None:
    # prepare: two clients whose updates swap between rounds, so the one above the loss median in round 1 is below
    # it in round 2; q_min 1 makes the one below the median poor (a grace scores it 1.0)
    from fedchain.fl.quality import GraceMemory, GraceRule, grace_memory

    g = initial_params(SPEC.model_spec(), seed=2)
    generator = torch.Generator().manual_seed(2)
    small, large = (torch.randn(g.numel(), generator=generator) * scale for scale in (0.01, 0.2))
    rule = GraceRule(min_quality=1.0, allowance=1, accuracy_share=0.0)
    last: StrategyState | None = None

    def scored(first: torch.Tensor, second: torch.Tensor, state: StrategyState | None) -> tuple[float, ...]:
        clients = [ClientInput(first, 100, 10), ClientInput(second, 100, 10)]
        outcome = score_round(
            get_strategy("fedavg"),
            g,
            clients,
            evaluator,
            state,
            screening=NO_SCREENING,
            quality_floor=0.0,
            data_credit=1.0,
            grace=rule,
        )
        nonlocal last
        last = outcome.state
        return outcome.qualities

    # execute: round 1, then round 2 from its state, and round 2 again from no state
    round_1 = scored(small, large, None)
    after_1 = last
    round_2 = scored(large, small, after_1)
    after_2 = last
    round_2_fresh = scored(large, small, None)

    # assert: round 1 grants no grace (a first round); the memory says who was poor; round 2 graces that one
    # client only, at q_min, and only when the state of round 1 is carried
    poor = round_1[0] < 1.0
    assert grace_memory(after_1) == GraceMemory((poor, not poor), (0, 0), (False, False))
    good_then_poor = 1 if poor else 0
    assert round_2[good_then_poor] == 1.0 and round_2_fresh[good_then_poor] < 1.0
    assert round_2[1 - good_then_poor] == round_2_fresh[1 - good_then_poor] > 1.0
    assert grace_memory(after_2).used[good_then_poor] == 1 and grace_memory(after_2).poor[good_then_poor]
    assert grace_memory(last).used == (0, 0)  # the fresh round remembers nothing before it


def test_the_first_round_graces_a_model_at_chance_that_lowered_the_initial_loss(evaluator: Evaluator) -> None:
    # prepare: three descent steps on the validation loss from the initial model, of sizes 1, 20 and 30: all lower
    # the loss, none lifts the median model far above chance; q_min 1 makes the smallest step, scored against the
    # median loss, poor
    from fedchain.fl.quality import GraceRule, grace_memory

    g = initial_params(SPEC.model_spec(), seed=4)
    model = SPEC.model_spec().build()
    torch.nn.utils.vector_to_parameters(g.clone().requires_grad_(False), model.parameters())
    validation = load_validation(SPEC)
    loss = torch.nn.functional.cross_entropy(model(validation.images), validation.labels)
    descent = -torch.nn.utils.parameters_to_vector(torch.autograd.grad(loss, list(model.parameters()))).detach()
    steps = [descent * size * 1e-3 for size in (1, 20, 30)]
    by_loss = GraceRule(min_quality=1.0, allowance=2, chance=0.1, by_loss=True)
    accuracy_only = dataclasses.replace(by_loss, by_loss=False)

    def scored(rule: GraceRule, state: StrategyState | None) -> tuple[tuple[float, ...], StrategyState | None]:
        clients = [ClientInput(step, 100, 10) for step in steps]
        outcome = score_round(
            get_strategy("fedavg"), g, clients, evaluator, state,
            screening=NO_SCREENING, quality_floor=0.0, data_credit=1.0, grace=rule,
        )  # fmt: skip
        return outcome.qualities, outcome.state

    # execute: round 1 with and without the loss test, and a second round after a poor first one
    graced, after = scored(by_loss, None)
    plain, _ = scored(accuracy_only, None)
    again, _ = scored(by_loss, after)

    # assert: the smallest step is poor by its loss ratio and graced at q_min only by the loss test, in round 1 only
    # (a grace never follows a poor round, and round 2 does not ask the loss)
    initial = evaluator(g).loss
    assert all(loss < initial for loss in (evaluator(g + step).loss for step in steps))
    assert plain[0] < 1.0 and graced[0] == 1.0 and graced[1:] == plain[1:]
    assert grace_memory(after).used == (1, 0, 0)
    assert again[0] == plain[0]


def test_the_aggregator_rejects_a_model_that_predicts_worse_than_chance() -> None:
    """Four models trained from one start on the validation images: three on their labels, one on labels
    flipped (y -> 9 - y). The flipper's model scores near 0 and is rejected by screening's chance test, so the
    chain sees quality 0; the others pass."""
    from fedchain.data.faults import flip_labels
    from fedchain.trainer.config import TrainConfig
    from fedchain.trainer.local import flat_state, load_flat, model_spec_of, train_one_client

    spec = dataclasses.replace(SPEC, validation=ValidationSpec(size=1000, seed=3))
    evaluator = Evaluator(spec.model_spec(), load_validation(spec))
    data = evaluator.dataset
    g = initial_params(spec.model_spec(), seed=7)
    config = TrainConfig(lr=0.1, momentum=0.0, batch_size=10, local_epochs=1, seed=7)

    def trained(labels: torch.Tensor, seed: int) -> torch.Tensor:
        model = spec.model_spec().build()
        params = model_spec_of(model)
        load_flat(model, g, params)
        train_one_client(model, data.images, labels, config, torch.Generator().manual_seed(seed))
        return flat_state(model, params) - g

    flipped = flip_labels(data.labels, data.num_classes)
    updates = [trained(data.labels, seed) for seed in range(3)] + [trained(flipped, 3)]

    outcome = score_round(
        get_strategy("fedavg"),
        g,
        [ClientInput(u, 1000, 3) for u in updates],
        evaluator,
        None,
        quality_floor=0.2,
        data_credit=1.0,
        grace=None,
    )

    assert outcome.screening is not None
    assert outcome.screening.rejected() == {3: ScreeningReason.BELOW_CHANCE}
    assert [m.accepted for m in outcome.measurements] == [True, True, True, False]
    assert outcome.measurements[3].quality == 0


def test_the_first_round_graces_a_one_class_model_that_the_chance_test_kept(evaluator: Evaluator) -> None:
    """An honest client holding one class trains a model that names it for everything: about chance on the
    balanced validation set, its loss far above the initial model's, a loss quality far below q_min. Neither the
    accuracy nor the loss test tells it from a label flipper; screening's chance test does, and with the task's
    ``grace_first_round_screened`` its verdict graces the round. On a validation set too small for the test to
    reject anything, its verdict graces nothing."""
    from fedchain.fl.quality import GraceRule, grace_memory

    # prepare: two descent steps on the validation loss and one model pushed to class 3 by its last bias
    spec = dataclasses.replace(SPEC, validation=ValidationSpec(size=1000, seed=3))
    large = Evaluator(spec.model_spec(), load_validation(spec))
    g = initial_params(spec.model_spec(), seed=4)
    model = spec.model_spec().build()
    torch.nn.utils.vector_to_parameters(g.clone().requires_grad_(False), model.parameters())
    validation = large.dataset
    loss = torch.nn.functional.cross_entropy(model(validation.images), validation.labels)
    descent = -torch.nn.utils.parameters_to_vector(torch.autograd.grad(loss, list(model.parameters()))).detach()
    one_class = torch.zeros_like(g)
    one_class[-10 + 3] = 20.0  # the output layer's bias comes last
    steps = [one_class, descent * 0.02, descent * 0.03]
    chance_only = ScreeningConfig(
        max_norm_ratio=None, min_norm_ratio=None, min_cosine=None, min_agreement=None, min_novelty=None,
        novelty_margin=None, max_loss_ratio=None, min_chance_share=0.5,
    )  # fmt: skip
    by_screen = GraceRule(min_quality=0.5, allowance=2, chance=0.1, by_loss=True, by_screen=True)
    without = dataclasses.replace(by_screen, by_screen=False)

    def scored(rule: GraceRule, on: Evaluator) -> tuple[tuple[float, ...], StrategyState | None]:
        clients = [ClientInput(step, 100, 10) for step in steps]
        outcome = score_round(
            get_strategy("fedavg"), g, clients, on, None,
            screening=chance_only, quality_floor=0.0, data_credit=1.0, grace=rule,
        )  # fmt: skip
        assert outcome.screening is not None and outcome.screening.accepted.all()
        return outcome.qualities, outcome.state

    # execute: round 1 with and without the verdict, and with it on a validation set of 100 samples
    graced, after = scored(by_screen, large)
    plain, _ = scored(without, large)
    small, _ = scored(by_screen, evaluator)

    # assert: the one-class model sits at chance with its loss risen; only the verdict graces it, and only where
    # the test could have rejected it
    pushed = large(g + one_class)
    assert 0.05 < pushed.accuracy < 0.15 and pushed.loss > large(g).loss
    assert plain[0] < 0.5 and graced[0] == 0.5 and graced[1:] == plain[1:]
    assert grace_memory(after).used == (1, 0, 0)
    assert small[0] < 0.5
