"""vla: BabyAI levels (minigrid) rolled out by the built-in expert bot.

Each step gives one sample: the agent's 7x7 egocentric view (object, colour,
state channels, each scaled to [0, 1]) and the caption `mission -> action`,
where the action is what the expert bot does from that view. The split unit is
the episode: all steps of one episode stay on one side.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator

import numpy as np

from prism.data.sources import Sample, package_versions

SOURCE = "minigrid BabyAI levels rolled out by minigrid.utils.baby_ai_bot.BabyAIBot"
LEVELS = (
    "BabyAI-GoToLocal-v0",
    "BabyAI-PickupLoc-v0",
    "BabyAI-OpenDoor-v0",
    "BabyAI-PutNextLocal-v0",
    "BabyAI-GoToObj-v0",
)
EPISODES_PER_LEVEL = 200
MAX_STEPS = 64  # longer expert episodes are cut (the bot rarely needs more on these levels)
# The largest values of minigrid's OBJECT_TO_IDX, COLOR_TO_IDX, STATE_TO_IDX.
CHANNEL_MAX = np.array([10.0, 5.0, 2.0], np.float32)


def versions() -> dict[str, str]:
    return package_versions("minigrid", "gymnasium", "numpy")


def observation(image: np.ndarray) -> np.ndarray:
    """[7, 7, 3] uint8 view -> [3, 7, 7] float32 in [0, 1]."""
    return (np.asarray(image, np.float32) / CHANNEL_MAX).transpose(2, 0, 1).copy()


def episode(env, seed: int) -> list[tuple[np.ndarray, str, str]]:
    """(view, mission, action name) for each expert step of one episode."""
    from minigrid.utils.baby_ai_bot import BabyAIBot  # noqa: PLC0415 lazy: minigrid

    steps = []
    with contextlib.redirect_stdout(io.StringIO()):  # the level generator prints
        obs, _ = env.reset(seed=seed)
        bot = BabyAIBot(env.unwrapped)
        for _ in range(MAX_STEPS):
            action = bot.replan()
            steps.append((observation(obs["image"]), obs["mission"], env.unwrapped.actions(action).name))
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
    return steps


def samples(seed: int) -> Iterator[Sample]:
    import gymnasium as gym  # noqa: PLC0415 lazy: gymnasium
    import minigrid  # noqa: F401, PLC0415 lazy: minigrid; the import registers the BabyAI levels

    rng = np.random.default_rng([seed, 11])
    for level in LEVELS:
        env = gym.make(level)
        tag = level.split("-")[1].lower()
        seeds = rng.choice(2**31 - 1, size=EPISODES_PER_LEVEL, replace=False)
        for e, env_seed in enumerate(seeds):
            for t, (view, mission, action) in enumerate(episode(env, int(env_seed))):
                yield Sample(f"{tag}{e:04d}", t, view, f"{mission} -> {action}")
        env.close()
