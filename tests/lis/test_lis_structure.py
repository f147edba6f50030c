"""LIS structures (paper §4.1): builders, validation, batched tensor form."""

import pytest
import torch

from structpe.lis import structure as S


def test_sequence_is_one_instance_with_positions():
    st = S.from_sequence([5, 6, 7])
    t = st.to_tensors()
    assert t.position.tolist() == [0, 1, 2]
    assert t.instance.tolist() == [0, 0, 0]
    assert S.from_sequence([5, 6, 7], roles_as_positions=True).to_tensors().role.tolist() == [0, 1, 2]


def test_kg_triples_roles_and_instances():
    st = S.from_kg_triples(
        [([1, 2], "capital_of", [3]), ([4], "born_in", [5, 6])], relations=["born_in", "capital_of"]
    )
    t = st.to_tensors()
    assert st.roles == ["HEAD_born_in", "TAIL_born_in", "HEAD_capital_of", "TAIL_capital_of"]
    assert t.instance.tolist() == [0, 0, 0, 1, 1, 1]
    assert [st.roles[r] for r in t.role.tolist()][:3] == ["HEAD_capital_of"] * 2 + ["TAIL_capital_of"]
    assert t.position.tolist() == [0, 1, 0, 0, 0, 1]
    assert st.sigma(2, 0) == "TAIL_capital_of"


def test_tree_edges_and_multiple_incidences():
    # 0 is the root; 1, 2 children of 0; 3 child of 1
    st = S.from_tree([-1, 0, 0, 1], [10, 11, 12, 13])
    assert len(st.instances) == 3
    assert len(st.incidences) == 6  # two endpoints per edge; node 0 and 1 appear twice
    t = st.to_tensors()
    assert t.token.tolist() == [0, 1, 0, 2, 1, 3]
    assert t.position.tolist() == [0, 1, 0, 1, 1, 2]  # depths
    with pytest.raises(ValueError):
        S.from_tree([-1, -1], [0, 1])


def test_grid_and_hyperedges():
    g = S.from_grid(torch.arange(6).reshape(2, 3)).to_tensors()
    assert g.position.shape == (6, 2)
    assert g.position[4].tolist() == [1, 1]
    h = S.from_hyperedges([("interacts", [("drug", [1]), ("target", [2, 3]), ("disease", [4])])])
    t = h.to_tensors()
    assert h.roles == ["interacts:drug", "interacts:target", "interacts:disease"]
    assert t.role.tolist() == [0, 1, 1, 2]
    with pytest.raises(ValueError, match="repeats a role"):
        S.from_hyperedges([("r", [("a", [1]), ("a", [2])])])


def test_validation_and_collate():
    with pytest.raises(ValueError, match="instance"):
        S.IncidenceStructure([1], ["e"], ["r"], [S.Incidence(0, 3, 0)])
    with pytest.raises(ValueError, match="twice"):
        S.IncidenceStructure([1], ["e"], ["r"], [S.Incidence(0, 0, 0), S.Incidence(0, 0, 0)])
    b = S.collate([S.from_sequence([1, 2, 3]).to_tensors(), S.from_sequence([4]).to_tensors()])
    assert b.content.shape == (2, 3)
    assert b.mask.tolist() == [[True, True, True], [True, False, False]]
    assert b.instance[1].tolist() == [0, -1, -1]
