"""The Real model page's model switch carries no model's own parameters to the other: switching SmolLM2 -> MiniLM
drops every SmolLM2-only parameter from the address bar (temperature, top-k, the what-ifs, QK-norm, longer than
trained, the alternative token), switching MiniLM -> SmolLM2 drops MiniLM's sections' (roles, flow, heads off, token
sets); switching back, each model's widgets still hold their values and write them back, so the address bar is the
one the model had. The check on the other model's side is a whitelist (what that model's view reads), so a new
parameter a section forgets to drop fails here too."""

from __future__ import annotations

from tests.address_bar import address
from tests.app_opener import open_app

PAGE = "app_pages/real_model.py"
SHARED = {"rm_text", "rm_layer", "rm_head"}  # both models read the prompt, a layer and a head
MINILM_OWN = {"rm_roles", "rm_flow", "rm_flow_layer", "rm_flow_token", "rm_flow_dir", "rm_off", "rm_off_mode",
              "rm_sq", "rm_sk"}
SMOLLM2_LINK = dict(model="smollm2", rm_temp="0.5", rm_topk="5", rm_alt=" Rome", rm_sparse="all",
                    rm_whatif_text="calibration", rm_qknorm="all", rm_qknorm_gain="matched", rm_long="1",
                    rm_long_method="ntk", rm_long_factor="4")


def switch(at, model: str):
    at.segmented_control(key="w_rm_model").set_value(model).run()
    assert not at.exception, [e.message for e in at.exception]
    assert not [w.value for w in at.warning], [w.value for w in at.warning]  # nobody typed a bad link
    return dict(address(at))


def test_smollm2s_own_parameters_leave_with_it_and_come_back(smollm2, model):
    at = open_app(PAGE, timeout=900, **SMOLLM2_LINK)
    before = dict(address(at))
    assert {name: before[name] for name in SMOLLM2_LINK} == SMOLLM2_LINK  # the link is read and written back
    on_minilm = switch(at, "minilm")
    assert set(on_minilm) <= SHARED | MINILM_OWN, set(on_minilm) - SHARED - MINILM_OWN
    assert on_minilm["rm_text"] == before["rm_text"]  # the prompt travels
    assert switch(at, "smollm2") == before
    assert at.toggle(key="w_sm_long_on").value and at.toggle(key="w_sm_qknorm_on").value
    assert at.slider(key="w_sm_temp").value == 0.5


def test_minilms_own_parameters_leave_with_it_and_come_back(smollm2, model):
    at = open_app(PAGE, timeout=900, rm_text="Fish swim in rivers.", rm_roles="next", rm_flow="flow",
                  rm_flow_layer="2", rm_off="1.2", rm_sq="1", rm_sk="0")
    before = dict(address(at))
    assert {"rm_roles", "rm_flow", "rm_flow_layer", "rm_off", "rm_sq", "rm_sk"} <= set(before)
    on_smollm2 = switch(at, "smollm2")
    assert not set(on_smollm2) & MINILM_OWN, set(on_smollm2) & MINILM_OWN
    assert on_smollm2["model"] == "smollm2" and on_smollm2["rm_text"] == before["rm_text"]
    assert switch(at, "minilm") == before
