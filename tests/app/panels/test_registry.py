"""The panel registry: every kind a scenario may name has a panel with a text form."""
from lineage.scenario.schema import PANEL_KINDS
from lineage.app.panels import _FOUND, PANELS


def test_registry_covers_the_scenario_kinds():
    assert set(PANELS) == set(PANEL_KINDS) == set(_FOUND)      # no panel file of a kind the list lacks
    for kind, panel in PANELS.items():
        assert panel.kind == kind and callable(panel.text_form)
