"""NUTS for the weighted models, compiled once per model and MCMC settings.

NumPyro's ``MCMC.run`` traces and compiles its sampling loop again on every call (and,
with sequential chains, once per chain; ``jit_model_args`` and a cached ``MCMC`` do not
prevent it in NumPyro 0.22): measured 6 s (Poisson) to 16 s (negative binomial) of XLA
compilation in every fit of the study, against 2 to 5 s of sampling. Here a whole fit
(NUTS initialisation, warmup with step-size and mass-matrix adaptation and sampling, in
one loop) of all chains (one after another, ``lax.map``) is a single jitted function of
(keys, initial values, y, weights). It is built once per (family, settings) and cached, so
JAX compiles it once per data size; every further fit of the same data set (other
weights, other seed) only runs it. The data and weights are arguments of the compiled
program, not constants in it, so the program is also the same across processes: with
JAX's persistent compilation cache (``jax_compilation_cache_dir``, set by the workflow
script, never here) a later job loads it instead of compiling it.

The chains run one after another rather than vectorised (``vmap``): measured on the
negative binomial, sampling takes as long either way, while the vectorised program takes
5 s longer to trace (per process, even with the persistent cache).

The kernel is NumPyro's own NUTS (``numpyro.infer.hmc.hmc``) on the potential energy of
the model in ``models``, with ``NUTS``'s defaults (diagonal mass matrix, tree depth 10);
only the loop around it differs from ``MCMC``.
"""

from __future__ import annotations

import functools

import numpy as np

from dpcounts import extras

try:
    import jax
    from jax import lax
    from numpyro import handlers
    from numpyro.distributions.transforms import biject_to
    from numpyro.infer.hmc import hmc
    from numpyro.infer.initialization import init_to_feasible
    from numpyro.infer.util import get_potential_fn
except ModuleNotFoundError as error:  # the extra 'mcmc' (pip install 'dpcounts[mcmc]')
    extras.raise_missing("mcmc", __name__, error)

from dpcounts.studies.pseudo_posterior.models import MODELS


def _potential(family: str):
    """Potential-energy and postprocessing generators of a model, taking (y, weights).

    ``numpyro.infer.util.initialize_model`` would also search for initial values (a
    compiled search that costs seconds per process); the chains' starts come from the
    caller, so only the model's latent sites and their transforms are needed. They are
    read off one abstract evaluation of the model (``jax.eval_shape``: nothing is run or
    compiled), at a feasible point rather than a draw from the priors.
    """
    model = MODELS[family]
    transforms = {}

    def find_latent_sites(y, weights):
        feasible = handlers.substitute(handlers.seed(model, 0), substitute_fn=init_to_feasible)
        trace = handlers.trace(feasible).get_trace(y, weights)
        for name, site in trace.items():
            if site["type"] == "sample" and not site["is_observed"]:
                transforms[name] = biject_to(site["fn"].support)

    example = jax.ShapeDtypeStruct((1,), np.int32), jax.ShapeDtypeStruct((1,), np.float32)
    jax.eval_shape(find_latent_sites, *example)
    return get_potential_fn(model, transforms, replay_model=True, dynamic_args=True)


@functools.lru_cache(maxsize=8)
def compiled_sampler(family: str, warmup: int, samples: int, target_accept: float):
    """Jitted ``run(keys, init, y, weights) -> {site: (chains, samples)}`` for one model.

    ``keys`` has one PRNG key per chain, ``init`` one unconstrained start per chain and
    latent site; the result holds every sample and deterministic site of the model.
    """
    potential_fn_gen, postprocess_fn_gen = _potential(family)
    init_kernel, sample_kernel = hmc(potential_fn_gen=potential_fn_gen, algo="NUTS")

    def one_chain(key, init, y, weights):
        args = (y, weights)
        state = init_kernel(
            init, warmup, target_accept_prob=target_accept, model_args=args, rng_key=key
        )

        def step(s, _):
            s = sample_kernel(s, model_args=args)
            return s, s.z

        # one loop over warmup and sampling, so the kernel is traced and compiled once
        _, z = lax.scan(step, state, length=warmup + samples)
        kept = jax.tree.map(lambda values: values[warmup:], z)
        return jax.vmap(postprocess_fn_gen(*args))(kept)

    def all_chains(keys, init, y, weights):
        return lax.map(lambda chain: one_chain(*chain, y, weights), (keys, init))

    return jax.jit(all_chains)


def nuts_draws(
    y: np.ndarray,
    weights: np.ndarray,
    family: str,
    chains: int,
    warmup: int,
    samples: int,
    target_accept: float,
    seed: int,
    init: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """Draws of every site of the model, by chain: {site: (chains, samples)} as float.

    ``y`` and ``weights`` may be the records or, equivalently (the pseudo likelihood is a
    weighted sum), each distinct count once with the total weight of its records.
    """
    run = compiled_sampler(family, int(warmup), int(samples), float(target_accept))
    keys = jax.random.split(jax.random.PRNGKey(seed), chains)
    init = {name: np.asarray(value, dtype=np.float32) for name, value in init.items()}
    draws = run(keys, init, np.asarray(y, dtype=np.int32), np.asarray(weights, dtype=np.float32))
    return {name: np.asarray(value, dtype=float) for name, value in draws.items()}
