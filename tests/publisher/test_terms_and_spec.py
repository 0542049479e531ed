"""Task terms in human units -> the contract's TaskParams; the task spec's canonical bytes and ids (no chain)."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from fedchain.errors import ConfigError, TaskSpecError
from fedchain.publisher.terms import PublishConfig, TaskTerms, load_publish_config
from fedchain.store import keccak256, open_store
from fedchain.taskspec import (
    PrivacyMechanism,
    TaskSpec,
    ValidationSpec,
    load_model,
    load_spec,
    model_meta,
    put_initial_model,
    put_spec,
    update_meta,
)
from fedchain.trainer.config import TrainConfig
from fedchain.units import parse_wei

#: Anvil's account 1, in checksum form.
AGGREGATOR = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


@pytest.mark.parametrize(
    ("text", "wei"),
    [(5, 5), ("123", 123), ("1e15", 10**15), ("0.5ether", 5 * 10**17), ("20 gwei", 2 * 10**10), ("1_000wei", 1000)],
)
def test_amounts_parse_to_exact_wei(text: int | str, wei: int) -> None:
    assert parse_wei(text) == wei


def test_amounts_of_more_digits_than_decimals_default_precision_stay_exact() -> None:
    assert parse_wei(str(2**96)) == 2**96
    assert parse_wei("79228162514.264337593543950335ether") == 2**96 - 1


@pytest.mark.parametrize("text", ["0.5wei", "-1", "lots", "1e-3gwei0"])
def test_amounts_that_are_not_whole_wei_are_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_wei(text)


def test_terms_become_the_contracts_fixed_point_params_exactly() -> None:
    terms = TaskTerms(rounds=4, target_accuracy=0.9, min_loss_reputation=0.1, min_quality=0.3, reputation_cap=2.5)

    params = terms.to_params(model_id=b"\x01" * 32, dataset_id=b"\x02" * 32)

    assert params.target_accuracy == 9 * 10**17 and params.min_loss_reputation == 10**17
    assert params.min_quality == 3 * 10**17 and params.reputation_cap == 25 * 10**17
    assert (params.rounds, params.model_id, params.dataset_id) == (4, b"\x01" * 32, b"\x02" * 32)


def test_terms_out_of_range_are_refused_before_any_transaction() -> None:
    with pytest.raises(ConfigError, match="rounds"):
        TaskTerms(rounds=0)
    with pytest.raises(ConfigError, match="target_accuracy"):
        TaskTerms(target_accuracy=1.5)


def test_publish_config_takes_terms_from_file_top_level_or_terms_and_rejects_unknown_keys(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_text(
        "rounds: 3\nfog_deposit: 1ether\nterms: {psi: 3gwei}\nspec: {strategy: quality}\naggregator: '0x70997970c51812dc3a010c7d01b50e0d17dc79c8'\n"
    )

    config = load_publish_config(path, terms={"rounds": 9, "phi": None}, budget="2ether")

    assert (config.terms.rounds, config.terms.fog_deposit, config.terms.psi) == (9, 10**18, 3 * 10**9)
    assert (config.spec.strategy, config.budget, config.aggregator) == ("quality", 2 * 10**18, AGGREGATOR)
    path.write_text("roundz: 3\n")
    with pytest.raises(ConfigError, match="roundz"):
        load_publish_config(path)
    assert load_publish_config() == PublishConfig()


@pytest.mark.parametrize("address", ["0x123", "0x70997970C51812dc3A010C7d01b50e0d17dc79c9X", 42])
def test_an_aggregator_that_is_not_an_address_is_refused_before_any_transaction(address: object) -> None:
    with pytest.raises(ConfigError, match="not an Ethereum address") as caught:
        PublishConfig(aggregator=address)  # type: ignore[arg-type]  # as a YAML file can give it

    assert "40 hex digits" in caught.value.hint


def test_an_aggregator_with_a_wrong_checksum_is_refused_as_a_likely_typo() -> None:
    typo = AGGREGATOR[:-1] + "9"  # the last digit mistyped: the letters' case no longer matches the checksum

    with pytest.raises(ConfigError, match="fails its EIP-55 checksum"):
        PublishConfig(aggregator=typo)
    assert PublishConfig(aggregator=AGGREGATOR.lower()).aggregator == AGGREGATOR


def test_equal_specs_have_equal_bytes_and_dataset_id_whatever_the_spelling() -> None:
    a = TaskSpec(dataset="MNIST", model="LeNet-5", strategy="fedave", strategy_options={"beta": 1.0, "alpha": 0.5})
    b = TaskSpec(dataset="mnist", model="lenet5", strategy="fedave", strategy_options={"alpha": 0.5, "beta": 1.0})

    assert a.to_bytes() == b.to_bytes() and a.dataset_id == keccak256(b.to_bytes())
    assert TaskSpec.from_bytes(a.to_bytes()) == b
    assert TaskSpec(lr=0.1).dataset_id != TaskSpec(lr=0.2).dataset_id


@pytest.mark.parametrize(
    ("strategy", "options", "message"),
    [
        ("fedmagic", {}, "unknown strategy 'fedmagic'"),
        ("fedave", {"beta": -1}, "beta=-1"),
        ("cgsv", {"gamma_zero": 0.5}, "unknown setting"),
    ],
)
def test_a_spec_with_a_strategy_no_aggregator_can_run_is_refused_before_a_task_escrows_its_budget(
    strategy: str, options: dict, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        TaskSpec(strategy=strategy, strategy_options=options)
    with pytest.raises(ConfigError, match=message):
        load_publish_config(spec={"strategy": strategy, "strategy_options": options})


@pytest.mark.parametrize(
    "data",
    [
        b"\x80not utf-8",
        b"[]",
        b'{"format":"other/1"}',
        b'{"format":"fedchain-taskspec/1","lr":-1}',
        b'{"format":"fedchain-taskspec/1","strategy":"fedmagic"}',
    ],
)
def test_spec_bytes_that_are_not_a_valid_spec_are_refused(data: bytes) -> None:
    with pytest.raises(TaskSpecError):
        TaskSpec.from_bytes(data)


def test_spec_and_initial_model_round_trip_through_the_store_by_their_on_chain_ids() -> None:
    store = open_store("memory://taskspec-test")
    spec = TaskSpec(model="lenet5", seed=7, validation=ValidationSpec(size=10))

    dataset_id = put_spec(store, spec)
    model_id = put_initial_model(store, spec)

    assert dataset_id == spec.dataset_id and load_spec(store, dataset_id) == spec
    assert model_id == put_initial_model(store, spec)  # the same seed gives the same bytes
    assert model_id != put_initial_model(store, TaskSpec(model="lenet5", seed=8))
    params = load_model(store, spec, model_id, round_number=0)
    assert set(params) == set(spec.param_spec().names)


def test_non_canonical_spec_bytes_in_the_store_are_refused() -> None:
    store = open_store("memory://taskspec-noncanonical")
    spaced = TaskSpec().to_bytes().replace(b",", b", ")

    digest = store.put(spaced)

    with pytest.raises(TaskSpecError, match="canonical"):
        load_spec(store, digest)


def test_model_and_update_metadata_name_task_round_and_job() -> None:
    spec = TaskSpec(model="cnn")

    assert model_meta(spec, 5, 0).task_id == 0 and model_meta(spec, 5, 3).task_id == 5
    meta = update_meta(spec, 5, 3, 2, "0xABCDEF")
    assert (meta.task_id, meta.round, meta.job_id, meta.client, meta.kind, meta.model) == (
        5,
        3,
        2,
        "0xabcdef",
        "update",
        "cnn",
    )


def test_validation_given_as_a_mapping_becomes_a_validation_spec() -> None:
    assert TaskSpec(validation={"size": 50, "seed": 2}).validation == ValidationSpec(size=50, seed=2)  # type: ignore[arg-type]


def test_round_seeds_differ_per_round_and_task_seed() -> None:
    seeds = {TaskSpec(seed=s).train_config(r).seed for s in (0, 1) for r in (1, 2, 3)}
    assert len(seeds) == 6


def test_a_spec_trains_like_simulate_with_the_trainers_defaults_unless_it_names_its_own() -> None:
    default, own = TaskSpec(seed=2).train_config(1), TaskSpec(seed=2, lr=0.3, batch_size=64).train_config(1)

    assert default == dataclasses.replace(TrainConfig(), seed=default.seed)  # one definition of training that learns
    assert (own.lr, own.batch_size) == (0.3, 64)


def test_the_specs_privacy_mechanisms_are_exactly_the_ones_privatise_applies() -> None:
    from fedchain.data.privacy import Mechanism

    assert typing.get_args(PrivacyMechanism) == typing.get_args(Mechanism)
    for mechanism in typing.get_args(Mechanism):
        spec = TaskSpec(dataset="mnist", model="cnn", privacy_epsilon=2.0, privacy_mechanism=mechanism)
        assert TaskSpec.from_bytes(spec.to_bytes()).privacy_mechanism == mechanism


def test_a_spec_with_an_unknown_privacy_mechanism_is_refused() -> None:
    with pytest.raises(ConfigError, match="privacy_mechanism"):
        TaskSpec(dataset="mnist", model="cnn", privacy_mechanism="exponential")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("strategy", "train_from", "refusal"),
    [
        ("fedavg", "reward", "needs a strategy that rewards in kind"),
        ("fair", "reward", "contradicts strategy 'fair'"),
        ("fedave", "model", "must be 'global' or 'reward'"),
    ],
)
def test_a_spec_refuses_a_training_start_its_strategy_cannot_give(strategy: str, train_from: str, refusal: str) -> None:
    with pytest.raises(ConfigError, match=refusal):
        TaskSpec(dataset="mnist", model="lenet5", strategy=strategy, train_from=train_from)  # type: ignore[arg-type]


@pytest.mark.parametrize(("strategy", "train_from"), [("fedave", "reward"), ("fedfaim", "reward"), ("fair", "global")])
def test_a_spec_round_trips_the_model_its_clients_train_from(strategy: str, train_from: str) -> None:
    spec = TaskSpec(dataset="mnist", model="lenet5", strategy=strategy, train_from=train_from)  # type: ignore[arg-type]

    assert TaskSpec.from_bytes(spec.to_bytes()).train_from == train_from


def test_a_fedfaim_spec_states_todays_quality_check_and_an_older_one_keeps_the_plain_check() -> None:
    """fedfaim's check changed defaults after specs were stored: a spec without the options meant the seed's check."""
    new = TaskSpec(dataset="mnist", model="lenet5", strategy="fedfaim")
    stated = (
        b'"strategy_options":{"outlier_spread":3.0,"reject_failed":false,"significance":2.0,"tolerances_add":false}'
    )
    older_bytes = new.to_bytes().replace(stated, b'"strategy_options":{}')
    between = new.to_bytes().replace(stated, b'"strategy_options":{"outlier_spread":3.0,"significance":2.0}')
    lately = new.to_bytes().replace(
        stated, b'"strategy_options":{"outlier_spread":3.0,"reject_failed":false,"significance":2.0}'
    )

    today = {"significance": 2.0, "outlier_spread": 3.0, "reject_failed": False, "tolerances_add": False}
    assert dict(new.strategy_options) == today and stated in new.to_bytes()
    assert TaskSpec.from_bytes(new.to_bytes()) == new
    older = TaskSpec.from_bytes(older_bytes)
    # what its aggregator ran, so the auditor runs it too
    assert dict(older.strategy_options) == {
        "significance": 0.0,
        "outlier_spread": None,
        "reject_failed": True,
        "tolerances_add": True,
    }
    assert older.to_bytes() == older_bytes  # so its datasetId, the store key, is unchanged
    # a spec of 2026-11-25 had today's check, and a failing client was still rejected
    assert TaskSpec.from_bytes(between).strategy_options["reject_failed"] is True
    assert TaskSpec.from_bytes(between).to_bytes() == between
    # a spec of 2026-11-26 or 27 took the standard errors below the robust bound too
    assert TaskSpec.from_bytes(lately).strategy_options["tolerances_add"] is True
    assert TaskSpec.from_bytes(lately).to_bytes() == lately
    seed = {"significance": 0, "outlier_spread": None, "reject_failed": True, "tolerances_add": True}
    assert (
        TaskSpec(dataset="mnist", model="lenet5", strategy="fedfaim", strategy_options=seed).to_bytes() == older_bytes
    )


@pytest.mark.parametrize(
    ("strategy", "stated", "older", "meant"),
    [
        ("cgsv", b'{"contribution_measure":"loss_discounted","tau":"median"}', b"{}", {"tau": 1.0}),
        # a cgsv spec of 2026-11-26 to 28 stated the median length, and meant the seed's cosine as contribution
        (
            "cgsv",
            b'{"contribution_measure":"loss_discounted","tau":"median"}',
            b'{"tau":"median"}',
            {"tau": "median", "contribution_measure": "cosine"},
        ),
        (
            "fedave",
            b'{"contribution_measure":"discounted_accuracy","divergence_exponent":0.25,"tau":"median"}',
            b"{}",
            {"tau": 0.5},
        ),
        # a fedave spec of 2026-11-26 stated the median length, and meant the seed's reputation as contribution
        (
            "fedave",
            b'{"contribution_measure":"discounted_accuracy","divergence_exponent":0.25,"tau":"median"}',
            b'{"tau":"median"}',
            {"tau": "median", "contribution_measure": "reputation"},
        ),
        # one of the morning of 2026-11-27 stated the discounted accuracy, and meant its square root
        (
            "fair",
            b'{"contribution_measure":"discounted_accuracy","divergence_exponent":0.25}',
            b'{"contribution_measure":"discounted_accuracy"}',
            {"contribution_measure": "discounted_accuracy", "divergence_exponent": 0.5},
        ),
        (
            "fair",
            b'{"contribution_measure":"discounted_accuracy","divergence_exponent":0.25}',
            b"{}",
            {"contribution_measure": "signal"},
        ),
    ],
)
def test_a_spec_states_todays_changed_defaults_and_an_older_one_keeps_what_its_aggregator_ran(
    strategy: str, stated: bytes, older: bytes, meant: dict[str, object]
) -> None:
    new = TaskSpec(dataset="mnist", model="lenet5", strategy=strategy)
    older_bytes = new.to_bytes().replace(b'"strategy_options":' + stated, b'"strategy_options":' + older)

    assert b'"strategy_options":' + stated in new.to_bytes()
    assert TaskSpec.from_bytes(new.to_bytes()) == new
    kept = TaskSpec.from_bytes(older_bytes)
    assert older_bytes != new.to_bytes()
    assert {k: kept.strategy_options[k] for k in meant} == meant  # what its aggregator ran, so the auditor runs it too
    assert kept.to_bytes() == older_bytes  # its datasetId, the store key, is unchanged


def _today_and_before(*settings: bytes, new: TaskSpec | None = None) -> tuple[TaskSpec, TaskSpec]:
    """``new`` (today's default spec when None), and that spec as stored before ``settings`` (their JSON text)
    existed: today's states every setting and reads back equal, and the older one keeps its bytes when read and
    written again (its datasetId, the store key)."""
    new = TaskSpec(dataset="mnist", model="lenet5") if new is None else new
    older_bytes = new.to_bytes()
    for setting in settings:
        assert setting in older_bytes
        older_bytes = older_bytes.replace(setting, b"")
    assert TaskSpec.from_bytes(new.to_bytes()) == new
    older = TaskSpec.from_bytes(older_bytes)
    assert older.to_bytes() == older_bytes != new.to_bytes()
    return new, older


def test_a_spec_states_todays_quality_floor_and_an_older_one_keeps_the_seeds_measure() -> None:
    """The floor came after specs were stored: a spec without it meant the seed's quality, unfloored."""
    new, older = _today_and_before(b',"quality_floor":0.2', b'"early_floor":true,')

    assert new.quality_floor == 0.2
    assert older.quality_floor == 0.0  # what its aggregator ran, so the auditor runs it too
    assert TaskSpec(dataset="mnist", model="lenet5", quality_floor=0, early_floor=False).to_bytes() == older.to_bytes()


def test_a_spec_states_todays_data_credit_and_an_older_one_the_plain_contribution() -> None:
    """The data credit came after specs were stored, the floor's among them: a spec without it meant none."""
    cgsv = TaskSpec(dataset="mnist", model="lenet5", strategy="cgsv")
    new, older = _today_and_before(b'"data_credit":4.0,', b'"early_floor":true,', new=cgsv)

    assert new.data_credit == 4.0
    assert (older.data_credit, older.quality_floor) == (1.0, 0.2)  # a spec of the floor's day: floor, no credit
    older_spec = TaskSpec(dataset="mnist", model="lenet5", strategy="cgsv", data_credit=1, early_floor=False)
    assert older_spec.to_bytes() == older.to_bytes()


def test_a_spec_states_todays_early_floor_and_an_older_one_the_same_floor_in_every_round() -> None:
    """The early floor came after the floor: a spec of the floor's day floors every round at 0.2."""
    new, older = _today_and_before(b'"early_floor":true,')
    thresholds = {"min_quality": 0.5, "min_loss_reputation": 0.1}

    assert new.early_floor
    assert [new.floor_at(n, **thresholds) for n in (1, 2, 3, 50)] == [0.317, 0.282, 0.263, 0.205]
    assert not older.early_floor
    assert [older.floor_at(n, **thresholds) for n in (1, 2, 3, 50)] == [0.2] * 4
    unfloored = TaskSpec(dataset="mnist", model="lenet5", quality_floor=0)  # the seed's measure: nothing raised
    assert unfloored.floor_at(1, **thresholds) == 0.0
    # terms that never decay (q_min 0), or that ask for more than a quality below 1 can give: kept within [0, 1)
    assert new.floor_at(1, min_quality=0.0, min_loss_reputation=0.1) == 0.2
    assert new.floor_at(1, min_quality=1.5, min_loss_reputation=2.0) == 0.999


def test_a_spec_states_todays_grace_and_an_older_one_none() -> None:
    """The grace came after the early floor: a spec without it scored every poor round as it was."""
    new, older = _today_and_before(b'"quality_grace":2,')

    assert new.quality_grace == 2
    rule = new.grace_rule(min_quality=0.5)
    assert rule is not None and (rule.min_quality, rule.allowance, rule.chance) == (0.5, 2, 1 / new.num_classes)
    high = new.grace_rule(min_quality=1.5)  # terms may ask for more than a quality of 1 (floor_at caps its floor)
    assert high is not None and high.min_quality == 1.5
    assert older.quality_grace == 0 and older.grace_rule(min_quality=0.5) is None
    assert TaskSpec(dataset="mnist", model="lenet5", quality_grace=0).to_bytes() == older.to_bytes()


def test_a_spec_states_todays_first_round_grace_and_an_older_one_none() -> None:
    """The first round's grace came after the grace: a spec without it graced no client's first round."""
    new, older = _today_and_before(b'"grace_first_round":true,')

    assert new.grace_first_round and not older.grace_first_round
    rule = older.grace_rule(min_quality=0.5)
    assert rule is not None and rule.allowance == 2 and rule.chance is None
    with pytest.raises(ConfigError, match="grace_first_round must be true or false"):
        TaskSpec(grace_first_round="yes")  # type: ignore[arg-type]


def test_a_spec_states_todays_first_round_loss_test_and_an_older_one_the_accuracy_alone() -> None:
    """The first round's loss test came after the first round's grace: a spec without it graced by accuracy alone."""
    new, older = _today_and_before(b'"grace_first_round_loss":true,')

    assert new.grace_first_round_loss and not older.grace_first_round_loss
    rule = new.grace_rule(min_quality=0.5)
    assert rule is not None and rule.by_loss and rule.chance == 0.1
    rule = older.grace_rule(min_quality=0.5)
    assert rule is not None and not rule.by_loss and rule.chance == 0.1
    with pytest.raises(ConfigError, match="grace_first_round_loss must be true or false"):
        TaskSpec(grace_first_round_loss=1)  # type: ignore[arg-type]


def test_a_spec_states_todays_gradient_clip_and_an_older_one_plain_sgd() -> None:
    """The clip came after the first specs: a spec without it trained with plain SGD, and one that turns it off
    has the bytes of that older spec."""
    new, older = _today_and_before(b'"max_grad_norm":5.0,')

    assert new.max_grad_norm == 5.0 and new.train_config(1).max_grad_norm == 5.0
    assert older.max_grad_norm is None and older.train_config(1).max_grad_norm is None
    assert older.to_bytes() == TaskSpec(dataset="mnist", model="lenet5", max_grad_norm=None).to_bytes()
    with pytest.raises(ConfigError, match="max_grad_norm must be a positive number or null"):
        TaskSpec(max_grad_norm=0.0)


def test_a_spec_states_todays_first_round_chance_verdict_and_an_older_one_none() -> None:
    """Taking the chance test's verdict in the first round's grace came after the loss test: a spec without it
    graced a first-round model by its accuracy or its loss only."""
    new, older = _today_and_before(b'"grace_first_round_screened":true,')

    assert new.grace_first_round_screened and not older.grace_first_round_screened
    rule = new.grace_rule(min_quality=0.5)
    assert rule is not None and rule.by_screen and rule.by_loss
    rule = older.grace_rule(min_quality=0.5)
    assert rule is not None and not rule.by_screen and rule.by_loss
    no_first_round = TaskSpec(dataset="mnist", model="lenet5", grace_first_round=False).grace_rule(min_quality=0.5)
    assert no_first_round is not None and not no_first_round.by_screen
    with pytest.raises(ConfigError, match="grace_first_round_screened must be true or false"):
        TaskSpec(grace_first_round_screened="yes")  # type: ignore[arg-type]


def test_a_spec_states_todays_extra_first_round_grace_and_an_older_one_counts_it() -> None:
    """Leaving the first round's grace out of the allowance came after the chance verdict: a spec without it
    counted a first-round grace as one of ``quality_grace``, so its auditor does too."""
    new, older = _today_and_before(b'"grace_first_round_extra":true,')

    assert new.grace_first_round_extra and not older.grace_first_round_extra
    rule = new.grace_rule(min_quality=0.5)
    assert rule is not None and rule.first_extra
    rule = older.grace_rule(min_quality=0.5)
    assert rule is not None and not rule.first_extra and rule.by_screen
    no_first_round = TaskSpec(dataset="mnist", model="lenet5", grace_first_round=False).grace_rule(min_quality=0.5)
    assert no_first_round is not None and not no_first_round.first_extra
    with pytest.raises(ConfigError, match="grace_first_round_extra must be true or false"):
        TaskSpec(grace_first_round_extra=1)  # type: ignore[arg-type]


def test_a_spec_states_todays_novelty_margin_and_vouch_and_an_older_one_neither() -> None:
    """The doubt of a narrow pass and the new part's vouch in the agreement rule came after the novelty rule: a
    spec without them scored every accepted update in full and rejected by the whole vector's agreement alone, so
    its auditor does too."""
    new, older = _today_and_before(b',"novelty_margin":0.5', b'"novelty_vouches":true,')

    assert new.screening.novelty_margin == 0.5 and new.screening.novelty_vouches
    assert older.screening.novelty_margin is None and not older.screening.novelty_vouches
    assert older.screening.min_novelty == 3.0


def test_a_spec_states_todays_second_grace_in_a_row_and_an_older_one_graces_none_after_a_poor_round() -> None:
    """Grace for a second poor round in a row came after the extra first-round grace: a spec without it graced no
    round that followed a poor one, so its auditor does not either."""
    new, older = _today_and_before(b'"grace_two_in_a_row":true,')

    assert new.grace_two_in_a_row and not older.grace_two_in_a_row
    rule = new.grace_rule(min_quality=0.5)
    assert rule is not None and rule.two_in_a_row
    rule = older.grace_rule(min_quality=0.5)
    assert rule is not None and not rule.two_in_a_row and rule.first_extra
    with pytest.raises(ConfigError, match="grace_two_in_a_row must be true or false"):
        TaskSpec(grace_two_in_a_row="yes")  # type: ignore[arg-type]


def test_a_spec_states_todays_doubt_by_shape_and_an_older_one_holds_every_narrow_pass() -> None:
    """Reading the new part's shape in the doubt came after the doubt: a spec without it held every narrow pass in
    doubt, so its auditor does too."""
    new, older = _today_and_before(b'"doubt_max_kurtosis":2.0,')

    assert new.screening.doubt_max_kurtosis == 2.0
    assert older.screening.doubt_max_kurtosis is None and older.screening.novelty_margin == 0.5


def test_a_spec_refuses_an_early_floor_that_is_not_a_boolean() -> None:
    with pytest.raises(ConfigError, match="early_floor"):
        TaskSpec(dataset="mnist", model="lenet5", early_floor="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("credit", [0.5, float("inf"), float("nan")])
def test_a_spec_refuses_a_data_credit_below_1_or_not_finite(credit: float) -> None:
    with pytest.raises(ConfigError, match="data credit"):
        TaskSpec(dataset="mnist", model="lenet5", data_credit=credit)


@pytest.mark.parametrize("floor", [-0.1, 1.0, float("nan")])
def test_a_spec_refuses_a_quality_floor_outside_0_to_1(floor: float) -> None:
    with pytest.raises(ConfigError, match="quality floor"):
        TaskSpec(dataset="mnist", model="lenet5", quality_floor=floor)
