"""Client faults and local privacy noise: exact where the formula is exact, statistical otherwise."""

from __future__ import annotations

import math

import pytest
import torch

from fedchain.data import (
    ImageDataset,
    flip_labels,
    flip_sign,
    free_ride,
    noise_of_norm,
    noise_scale,
    noisy_labels,
    privatise,
    scale_update,
    sybil_update,
)
from fedchain.data.faults import attack_updates
from fedchain.data.privacy import Mechanism
from fedchain.errors import ConfigError


def test_noisy_labels_change_exactly_the_fraction_asked_and_leave_the_input_alone() -> None:
    labels = torch.arange(100) % 10
    original = labels.clone()

    noisy = noisy_labels(labels, 0.5, 10, generator=torch.Generator().manual_seed(0))

    assert int((noisy != labels).sum()) == 50
    assert noisy.min() >= 0 and noisy.max() <= 9
    assert torch.equal(labels, original)


def test_noisy_labels_with_fraction_zero_are_unchanged_and_fraction_must_be_in_range() -> None:
    labels = torch.arange(20) % 10
    assert torch.equal(noisy_labels(labels, 0.0, 10, generator=torch.Generator()), labels)
    with pytest.raises(ConfigError, match=r"in \[0, 1\]"):
        noisy_labels(labels, 1.5, 10, generator=torch.Generator())


def test_label_flipping_maps_y_to_c_minus_1_minus_y_or_a_given_mapping() -> None:
    labels = torch.tensor([0, 1, 9, 4])

    assert flip_labels(labels, 10).tolist() == [9, 8, 0, 5]
    assert flip_labels(labels, 10, {1: 7, 4: 1}).tolist() == [0, 7, 9, 1]


def test_zero_free_rider_submits_no_change() -> None:
    assert torch.equal(free_ride(torch.randn(5), "zero"), torch.zeros(5))


def test_random_free_rider_matches_the_honest_update_norm_and_is_reproducible() -> None:
    honest = torch.randn(100_000, generator=torch.Generator().manual_seed(1)) * 0.3

    fake = free_ride(honest, "random", generator=torch.Generator().manual_seed(2))
    again = free_ride(honest, "random", generator=torch.Generator().manual_seed(2))

    assert torch.equal(fake, again)
    assert float(fake.norm() / honest.norm()) == pytest.approx(1.0, abs=0.02)
    assert abs(float(torch.nn.functional.cosine_similarity(fake, honest, dim=0))) < 0.02


def test_scaled_update_is_the_update_times_the_factor() -> None:
    assert scale_update(torch.tensor([1.0, -2.0]), 3.0).tolist() == [3.0, -6.0]


def test_sign_flip_sends_minus_the_honest_update_and_leaves_it_alone() -> None:
    honest = torch.tensor([1.0, -2.0, 0.0])

    assert flip_sign(honest).tolist() == [-1.0, 2.0, 0.0]
    assert honest.tolist() == [1.0, -2.0, 0.0]


def test_noise_update_has_exactly_the_honest_norm_and_no_honest_direction() -> None:
    honest = torch.tensor([3.0, 4.0] + [0.0] * 9998)  # norm 5

    noise = noise_of_norm(honest, generator=torch.Generator().manual_seed(0))
    again = noise_of_norm(honest, generator=torch.Generator().manual_seed(0))

    assert torch.equal(noise, again)
    assert float(noise.norm()) == pytest.approx(5.0, rel=1e-6)
    assert abs(float(torch.nn.functional.cosine_similarity(noise, honest, dim=0))) < 0.05  # spread 1/sqrt(d) = 0.01
    assert torch.equal(noise_of_norm(torch.zeros(4), generator=torch.Generator()), torch.zeros(4))


def test_sybils_send_one_vector_minus_factor_times_the_mean_of_their_honest_updates() -> None:
    honest = torch.tensor([[1.0, 2.0], [3.0, -2.0], [2.0, 3.0]])  # mean [2, 1]

    assert sybil_update(honest, 1.0).tolist() == [-2.0, -1.0]
    assert sybil_update(honest, 3.0).tolist() == [-6.0, -3.0]
    with pytest.raises(ConfigError, match="positive finite"):
        sybil_update(honest, 0.0)
    with pytest.raises(ConfigError, match=r"\[k, d\]"):
        sybil_update(torch.zeros(0, 2), 1.0)


def test_noise_scales_follow_the_laplace_and_gaussian_mechanisms() -> None:
    assert noise_scale(2.0, "laplace") == 0.5  # b = sensitivity 1 / epsilon
    # sigma = sqrt(2 ln(1.25 / 1e-5)) / 1 = sqrt(2 * 11.7361) = 4.8448
    assert noise_scale(1.0, "gaussian", delta=1e-5) == pytest.approx(4.8448, abs=1e-4)
    with pytest.raises(ConfigError, match="epsilon must be a positive number"):
        noise_scale(0.0)


def _grey(n: int) -> ImageDataset:
    # Pixels all 0.5 and an identity normalisation: images are pixels.
    return ImageDataset("grey", torch.full((n, 1, 10, 10), 0.5), torch.zeros(n, dtype=torch.int64), 2, (0.0,), (1.0,))


@pytest.mark.parametrize("mechanism, epsilon", [("laplace", 20.0), ("gaussian", 100.0)])
def test_privacy_noise_has_the_mechanisms_spread_and_stays_in_pixel_range(mechanism: Mechanism, epsilon: float) -> None:
    dataset = _grey(400)
    scale = noise_scale(epsilon, mechanism)  # 0.05 and 0.0484: clipping at 0 and 1 is 10 scales away

    noisy = privatise(dataset, epsilon, mechanism=mechanism, generator=torch.Generator().manual_seed(0))

    noise = (noisy.images - 0.5).double()
    assert noisy.images.min() >= 0.0 and noisy.images.max() <= 1.0
    assert torch.equal(noisy.labels, dataset.labels)
    if mechanism == "laplace":
        assert float(noise.abs().mean()) == pytest.approx(scale, rel=0.03)  # E|Laplace(0, b)| = b
    else:
        assert float(noise.std()) == pytest.approx(scale, rel=0.03)
    assert abs(float(noise.mean())) < scale * 0.02


def test_privacy_noise_is_added_on_the_0_1_scale_of_normalised_images() -> None:
    pixels = torch.full((50, 1, 4, 4), 0.25)
    dataset = ImageDataset(
        "mnist-like", (pixels - 0.1307) / 0.3081, torch.zeros(50, dtype=torch.int64), 10, (0.1307,), (0.3081,)
    )

    noisy = privatise(dataset, 1e9, generator=torch.Generator().manual_seed(0))

    assert torch.allclose(noisy.images * 0.3081 + 0.1307, pixels, atol=1e-5)
    assert math.isclose(noise_scale(1e9), 1e-9)


def test_an_attacking_fog_node_corrupts_the_updates_it_trained_as_simulate_does() -> None:
    honest = torch.tensor([[1.0, 2.0, 2.0], [3.0, 0.0, 4.0]])

    def attack(name: str, scale: float = 10.0) -> torch.Tensor:
        return attack_updates(honest, name, scale=scale, generator=torch.Generator().manual_seed(0))

    torch.testing.assert_close(attack("sign-flip"), -honest)
    torch.testing.assert_close(attack("scale", 3.0), 3.0 * honest)
    torch.testing.assert_close(attack("sybil", 1.0), torch.tensor([[-2.0, -1.0, -3.0]] * 2))
    noise = attack("noise")
    torch.testing.assert_close(noise.norm(dim=1), honest.norm(dim=1))
    assert not torch.allclose(noise, honest) and torch.equal(noise, attack("noise"))  # reproducible by its seed
    assert torch.equal(honest, torch.tensor([[1.0, 2.0, 2.0], [3.0, 0.0, 4.0]]))  # the honest updates are left alone


@pytest.mark.parametrize(
    ("attack", "scale", "refusal"), [("boost", 2.0, "unknown update attack"), ("scale", 0.0, "positive")]
)
def test_an_unknown_attack_or_a_scale_that_is_no_factor_is_refused(attack: str, scale: float, refusal: str) -> None:
    with pytest.raises(ConfigError, match=refusal):
        attack_updates(torch.ones(2, 3), attack, scale=scale, generator=torch.Generator())
