"""The ``stacked`` engine: all clients' models as one model whose layers hold every client's weights.

Each parameter is stacked over the ``n`` clients (``[n, *shape]``) and each
layer of the model is rewritten to compute all clients in one operation:

* ``Conv2d``: one grouped convolution. The clients' channels lie side by
  side (``[B, n * C, H, W]``) and the convolution has ``n * groups`` groups,
  so no client sees another's channels.
* ``Linear``: one batched matrix product over ``[n, B, features]``.
* ``Flatten``: turns the side-by-side channels into ``[n, B, features]``.
* Activations and pooling: unchanged, since they act on each channel alone.

The loss is the sum of the clients' mean losses, so plain autograd gives
every client's own gradient in one backward pass. A step then runs about as
many operations as one client's step, whatever the number of clients. The
sequential loop runs them once per client, and ``vmap`` adds torch.func's own
work to every one of them. On a GPU, where launching a LeNet-sized kernel
costs more than running it, those operations are what a round costs.

The model's forward is read with ``torch.fx``. It must be a chain of the
layers above, each taking the previous one's output (LeNet-5, the small CNN).
Anything else (a buffer, dropout, an operation outside a layer, a parameter
the forward never uses) is refused when the trainer is built, with a hint
to use ``vmap``, which trains any model without buffers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import fx, nn

from fedchain.errors import ConfigError
from fedchain.fl.params import ParamSpec
from fedchain.trainer.vectorised import Gradients, columns, masked_mean_losses

#: Layers without parameters that act on each element: they run unchanged on any layout.
ELEMENTWISE: tuple[type[nn.Module], ...] = (
    nn.ReLU,
    nn.LeakyReLU,
    nn.ELU,
    nn.GELU,
    nn.SiLU,
    nn.Tanh,
    nn.Sigmoid,
    nn.Identity,
)
#: Layers without parameters that act on each channel alone: they run unchanged on side-by-side channels.
PER_CHANNEL: tuple[type[nn.Module], ...] = (nn.MaxPool2d, nn.AvgPool2d)

#: What to do when a model cannot be stacked.
STACK_HINT = (
    "the stacked engine trains chains of Conv2d, Linear, Flatten, pooling and activation layers "
    "(LeNet-5, the small CNN); use engine='vmap' (any model without buffers) or 'sequential'"
)


@dataclass(frozen=True)
class StackedLayer:
    """One layer of the chain and the names of its parameters in the model's state dict."""

    module: nn.Module
    #: State-dict name of the weight (Conv2d, Linear), else None.
    weight: str | None = None
    #: State-dict name of the bias, None where the layer has none.
    bias: str | None = None


def _refuse(reason: str, hint: str = STACK_HINT) -> ConfigError:
    return ConfigError(f"the stacked engine cannot train this model: {reason}", hint=hint)


def _layer(name: str, module: nn.Module, channels_side_by_side: bool) -> StackedLayer:
    """The :class:`StackedLayer` of ``module`` (called ``name`` in the model), or a refusal."""
    if isinstance(module, nn.Conv2d):
        if not channels_side_by_side:
            raise _refuse(f"convolution {name} comes after a Flatten")
        if module.padding_mode != "zeros":
            raise _refuse(f"convolution {name} pads with {module.padding_mode!r}, not zeros")
    elif isinstance(module, nn.Linear):
        if channels_side_by_side:
            raise _refuse(f"linear layer {name} is not preceded by a Flatten")
    elif isinstance(module, nn.Flatten):
        if (module.start_dim, module.end_dim) != (1, -1):
            raise _refuse(f"{name} flattens dimensions {module.start_dim}..{module.end_dim}, not 1..-1")
        if not channels_side_by_side:
            return StackedLayer(nn.Identity())  # every sample is a flat vector already
    elif isinstance(module, PER_CHANNEL):
        if not channels_side_by_side:
            raise _refuse(f"pooling {name} comes after a Flatten")
    elif not isinstance(module, ELEMENTWISE):
        raise _refuse(f"layer {name} is a {type(module).__name__}")
    if isinstance(module, nn.Conv2d | nn.Linear):
        return StackedLayer(module, f"{name}.weight", None if module.bias is None else f"{name}.bias")
    if any(True for _ in module.parameters()):
        raise _refuse(f"layer {name} ({type(module).__name__}) has parameters")
    return StackedLayer(module)


def stack_plan(model: nn.Module) -> tuple[StackedLayer, ...]:
    """The chain of layers of ``model``'s forward, checked for the stacked engine (:class:`ConfigError` if not)."""
    buffers = [name for name, _ in model.named_buffers()]
    if buffers:
        raise _refuse(
            f"it has buffers ({', '.join(buffers[:3])})",
            hint="use engine='sequential' or 'process' for models with batch normalisation",
        )
    try:
        graph = fx.symbolic_trace(model).graph
    except Exception as err:  # tracing runs the model's own forward: any error means fx cannot read it
        raise _refuse(f"its forward cannot be traced ({err})") from err
    modules = dict(model.named_modules())
    layers: list[StackedLayer] = []
    previous: fx.Node | None = None
    channels_side_by_side = True
    for node in graph.nodes:
        if node.op == "placeholder":
            if previous is not None:
                raise _refuse("its forward takes more than one input")
            previous = node
        elif node.op == "output":
            if node.args != (previous,) or not layers:
                raise _refuse("its forward does not return the output of its last layer")
        elif node.op == "call_module" and node.args == (previous,) and not node.kwargs:
            layer = _layer(str(node.target), modules[str(node.target)], channels_side_by_side)
            channels_side_by_side = channels_side_by_side and not isinstance(layer.module, nn.Flatten)
            layers.append(layer)
            previous = node
        elif node.op == "call_module":
            raise _refuse(f"layer {node.target} does not take the previous layer's output alone")
        elif node.op == "get_attr":
            raise _refuse(f"its forward reads {node.target} outside a layer")
        else:
            what = (
                f"the tensor method {node.target}"
                if node.op == "call_method"
                else getattr(node.target, "__name__", node.target)
            )
            raise _refuse(f"its forward calls {what} outside a layer")
    used = {name for layer in layers for name in (layer.weight, layer.bias) if name is not None}
    unused = [name for name, _ in model.named_parameters() if name not in used]
    if unused:
        raise _refuse(f"its forward never uses {', '.join(unused[:3])}")
    return tuple(layers)


def stacked_forward(
    layers: tuple[StackedLayer, ...], params: dict[str, torch.Tensor], images: torch.Tensor
) -> torch.Tensor:
    """Every client's logits ``[n, B, K]`` from its images ``[n, B, *sample]`` and stacked ``params`` ``[n, *shape]``."""
    n, batch = images.shape[:2]
    h = images.transpose(0, 1).reshape(batch, n * images.shape[2], *images.shape[3:])  # channels side by side
    for layer in layers:
        module = layer.module
        weight = None if layer.weight is None else params[layer.weight]
        bias = None if layer.bias is None else params[layer.bias]
        if isinstance(module, nn.Conv2d):
            assert weight is not None
            h = F.conv2d(
                h,
                weight.reshape(n * weight.shape[1], *weight.shape[2:]),
                None if bias is None else bias.reshape(-1),
                module.stride,
                module.padding,
                module.dilation,
                n * module.groups,
            )
        elif isinstance(module, nn.Linear):
            assert weight is not None
            h = (
                torch.bmm(h, weight.transpose(1, 2))
                if bias is None
                else torch.baddbmm(bias.unsqueeze(1), h, weight.transpose(1, 2))
            )
        elif isinstance(module, nn.Flatten):
            h = h.reshape(batch, n, -1).transpose(0, 1)  # client i's channels i*C..(i+1)*C-1, flattened as one client's
        else:
            h = module(h)
    return h


def stacked_gradients(
    layers: tuple[StackedLayer, ...], spec: ParamSpec, images: torch.Tensor, labels: torch.Tensor
) -> Gradients:
    """The ``stacked`` engine's gradient function: one forward and one backward pass for all clients."""

    def gradients(flat: torch.Tensor, rows: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = flat.shape[0]
        leaves = {name: block.detach().requires_grad_() for name, block in columns(flat, spec)}
        losses = masked_mean_losses(stacked_forward(layers, leaves, images[rows]), labels[rows], mask)
        grads = torch.autograd.grad(losses.sum(), list(leaves.values()))  # clients are independent: each gets its own
        return torch.cat([g.reshape(n, -1) for g in grads], dim=1), losses.detach()

    return gradients
