"""text_graph: networkx's graph atlas and named graphs as zero-padded 16x16 adjacency.

Captions state properties computed from the graph (nodes, edges, connectivity,
triangles, degrees, tree/bipartite/cycles, diameter). Each graph is stored twice
under different node orders (its two facets), which a reader of the adjacency
must see through. Named graphs with more than 16 nodes contribute connected
induced subgraphs grown from random roots; all subgraphs of one named graph
share one source item, so the split never separates them.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from prism.data.sources import Sample, package_versions

SOURCE = "networkx graph_atlas_g() (1253 graphs, <=7 nodes) + named graphs (<=16 nodes or subgraphs)"
MAX_NODES = 16
SUBGRAPHS_PER_LARGE = 24


def versions() -> dict[str, str]:
    return package_versions("networkx", "numpy")


def named_graphs() -> list[tuple[str, object]]:
    import networkx as nx  # noqa: PLC0415 lazy: networkx

    gens = [
        ("petersen", nx.petersen_graph),
        ("karate", nx.karate_club_graph),
        ("florentine", nx.florentine_families_graph),
        ("davis", nx.davis_southern_women_graph),
        ("lesmis", nx.les_miserables_graph),
        ("frucht", nx.frucht_graph),
        ("heawood", nx.heawood_graph),
        ("house", nx.house_graph),
        ("bull", nx.bull_graph),
        ("chvatal", nx.chvatal_graph),
        ("cubical", nx.cubical_graph),
        ("desargues", nx.desargues_graph),
        ("dodecahedral", nx.dodecahedral_graph),
        ("moebiuskantor", nx.moebius_kantor_graph),
        ("octahedral", nx.octahedral_graph),
        ("icosahedral", nx.icosahedral_graph),
        ("kite", nx.krackhardt_kite_graph),
        ("tutte", nx.tutte_graph),
        ("pappus", nx.pappus_graph),
        ("truncatedcube", nx.truncated_cube_graph),
        ("hypercube4", lambda: nx.hypercube_graph(4)),
        ("grid4x4", lambda: nx.grid_2d_graph(4, 4)),
        ("ladder8", lambda: nx.ladder_graph(8)),
        ("tree2x3", lambda: nx.balanced_tree(2, 3)),
        ("lollipop5x6", lambda: nx.lollipop_graph(5, 6)),
        ("barbell5x2", lambda: nx.barbell_graph(5, 2)),
        ("wheel12", lambda: nx.wheel_graph(12)),
        ("star15", lambda: nx.star_graph(15)),
        ("cycle16", lambda: nx.cycle_graph(16)),
        ("path16", lambda: nx.path_graph(16)),
        ("complete9", lambda: nx.complete_graph(9)),
        ("circladder7", lambda: nx.circular_ladder_graph(7)),
        ("bipartite5x6", lambda: nx.complete_bipartite_graph(5, 6)),
    ]
    return [(name, nx.convert_node_labels_to_integers(nx.Graph(make()))) for name, make in gens]


def grow_subgraph(graph, size: int, rng: np.random.Generator):
    """A connected induced subgraph of up to `size` nodes grown from a random root."""
    nodes = sorted(graph.nodes)
    chosen = [nodes[int(rng.integers(len(nodes)))]]
    seen = set(chosen)
    frontier = sorted(set(graph.neighbors(chosen[0])))
    while frontier and len(chosen) < size:
        nxt = frontier.pop(int(rng.integers(len(frontier))))
        if nxt in seen:
            continue
        seen.add(nxt)
        chosen.append(nxt)
        frontier = sorted(set(frontier) | (set(graph.neighbors(nxt)) - seen))
    return graph.subgraph(chosen).copy()


def adjacency(graph, order: np.ndarray) -> np.ndarray:
    """[16, 16] float32 adjacency with node `order[i]` in slot i, ones on the diagonal of real nodes, zero beyond."""
    import networkx as nx  # noqa: PLC0415 lazy: networkx

    n = graph.number_of_nodes()
    a = np.zeros((MAX_NODES, MAX_NODES), np.float32)
    a[:n, :n] = nx.to_numpy_array(
        graph, nodelist=[sorted(graph.nodes)[i] for i in order], dtype=np.float32, weight=None
    )
    a[np.arange(n), np.arange(n)] = 1.0  # the diagonal marks real nodes: an isolated node is not padding
    return a


def structure(graph) -> str:
    import networkx as nx  # noqa: PLC0415 lazy: networkx

    n, m = graph.number_of_nodes(), graph.number_of_edges()
    if n == 0:
        return "empty"
    connected = nx.is_connected(graph)
    if connected and m == n - 1:
        kind = "a tree"
    elif m == 0:
        kind = "no edges"
    elif nx.is_bipartite(graph):
        kind = "bipartite, cyclic" if nx.cycle_basis(graph) else "a forest"
    elif nx.is_forest(graph):
        kind = "a forest"
    else:
        kind = "odd cycles"
    if connected and n > 1:
        return f"{kind}, diameter {nx.diameter(graph)}"
    return f"{kind}, {nx.number_connected_components(graph)} parts"


def captions(graph) -> list[str]:
    import networkx as nx  # noqa: PLC0415 lazy: networkx

    n, m = graph.number_of_nodes(), graph.number_of_edges()
    tri = sum(nx.triangles(graph).values()) // 3
    conn = "connected" if n and nx.is_connected(graph) else "disconnected"
    degs = [d for _, d in graph.degree()]
    return [
        f"{n} nodes, {m} edges, {conn}, {tri} triangles",
        f"degree {max(degs)} to {min(degs)}; {structure(graph)}",
    ]


def samples(seed: int) -> Iterator[Sample]:
    import networkx as nx  # noqa: PLC0415 lazy: networkx

    rng = np.random.default_rng([seed, 7])
    items: list[tuple[str, object]] = [
        (f"atlas{i:04d}", g) for i, g in enumerate(nx.graph_atlas_g()) if g.number_of_nodes() > 0
    ]
    for name, graph in named_graphs():
        if graph.number_of_nodes() <= MAX_NODES:
            items.append((name, graph))
        else:
            for _ in range(SUBGRAPHS_PER_LARGE):
                size = int(rng.integers(8, MAX_NODES + 1))
                items.append((name, grow_subgraph(graph, size, rng)))
    facet_of: dict[str, int] = {}
    for source, graph in items:
        texts = captions(graph)
        for text in texts:
            facet = facet_of.get(source, 0)
            facet_of[source] = facet + 1
            order = rng.permutation(graph.number_of_nodes())
            yield Sample(source, facet, adjacency(graph, order), text)
