"""Word, file-name and directory pools of the built-in suite's TRAINING templates.

`TRAIN` feeds the train split, `TEST` the held-out test split of the same families and the families
never trained on (`unseen`). The paraphrase set has its own pools in `paraphrase.py`. The three are
pairwise disjoint (checked by the tests), and none uses a name from the builtin agent's worked
examples, so an answer seen in training never answers a held-out task.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Pools:
    """Where one split draws its surface forms from."""

    name: str
    words: tuple[str, ...]
    stems: tuple[str, ...]
    dirs: tuple[str, ...]
    exts: tuple[str, ...] = ("txt", "txt", "txt", "log", "dat")

    def word(self, rng: random.Random) -> str:
        return rng.choice(self.words)

    def sample(self, rng: random.Random, k: int) -> list[str]:
        return rng.sample(self.words, k)

    def files(self, rng: random.Random, k: int, exts: tuple[str | None, ...] = ()) -> list[str]:
        """k file names with distinct stems: a stem, sometimes with a digit, and an extension
        (exts[i] for the i-th name where given, else a text-like one)."""
        out = []
        for i, stem in enumerate(rng.sample(self.stems, k)):
            if rng.random() < 0.3:
                stem += str(rng.randint(1, 9))
            ext = exts[i] if i < len(exts) and exts[i] else rng.choice(self.exts)
            out.append(f"{stem}.{ext}")
        return out

    def file(self, rng: random.Random, ext: str | None = None) -> str:
        return self.files(rng, 1, (ext,))[0]

    def dir(self, rng: random.Random) -> str:
        return rng.choice(self.dirs)


def _split(text: str) -> tuple[str, ...]:
    return tuple(text.split())


TRAIN = Pools(
    "train",
    words=_split("""
        apple river candle orbit maple pepper violet harbor tiger falcon copper meadow lemon glacier
        walnut comet acorn badger beacon bison blossom breeze bucket butter cactus canyon carrot castle
        cedar cherry cider clover cloud cobra coconut coral cotton cricket crystal daisy desert dolphin
        dragon eagle ember feather fern fig fjord flint fossil fox garden garlic gazelle geyser goose
        granite grape gravel hazel hedge heron honey horizon iris ivory jade jasmine jungle kettle kiwi
        lagoon lantern lava lily lizard lotus magnet mango marsh melon mint moose moss mustard nectar
        nutmeg oak olive onion otter owl oyster panda parrot peach pearl pebble pelican penguin pine
        plum pond poppy pumpkin quartz rabbit radish raven reef rhubarb robin saffron salmon sandal
        sparrow spruce squash squid stone storm sunset swan thistle thunder timber toad topaz trout
        tundra turnip valley velvet walrus wheat willow wizard wolf yarrow zebra zinc almond amber aspen
        bamboo basil beetle birch bronze cabbage camel canary cobweb cocoa crane cumin dove"""),
    stems=_split("""
        report draft memo summary todo letter data catalog inventory budget schedule roster agenda
        minutes invoice receipt profile settings readme changelog results metrics prices orders tasks
        events contacts recipes playlist quotes scores stats status output input sample"""),
    dirs=_split("""
        archive docs build work stuff assets cache media reports projects drafts temp logs exports
        imports fixtures samples vendor tools scripts"""),
)

TEST = Pools(
    "test",
    words=_split("""
        banana forest anchor silver planet tulip rocket ginger marble island cobalt saddle avocado
        blizzard bramble canoe caramel cheetah chestnut cinnamon compass cypress dune elm emerald
        flamingo galaxy gecko hammock hyacinth iceberg jaguar juniper koala lilac llama lobster mammoth
        meteor mulberry narwhal nebula ocelot orchid papaya pigeon prairie quail raccoon sapphire
        sequoia summit tapir thimble tornado vanilla wombat yak cashew"""),
    stems=_split("""
        journal record sheet ledger brief digest paper entry bulletin almanac dossier manifest register
        tally index outline"""),
    dirs=_split("vault inbox shelf crate attic cellar locker pantry depot silo"),
)

TRAINING_POOLS = {"train": TRAIN, "test": TEST}
