"""The AWX configuration (awx/): awx.awx.job_template's own argument spec accepts every job template,
every survey is a valid AWX survey whose variables are the target playbook's declared inputs, destructive
operations ask for a confirmation that defaults to no, and the project's playbooks run the collection's by FQCN."""

import os
import subprocess

import pytest
import yaml

from support.estate import REPO_ROOT, run_module

AWX = os.path.join(REPO_ROOT, "awx")
SURVEY_TYPES = {"text", "textarea", "password", "integer", "float", "multiplechoice", "multiselect"}
# What a job template may say beyond the per-estate values awx/configure.yml adds to each.
ADDED_BY_CONFIGURE = {"organization", "project", "inventory", "credentials", "execution_environment", "state"}


def _load(*path):
    with open(os.path.join(*path)) as handle:
        return yaml.safe_load(handle)


CONTROLLER = _load(AWX, "controller.yml")
TEMPLATES = {template["name"]: template for template in CONTROLLER["continuity_awx_job_templates"]}
INPUTS = _load(REPO_ROOT, "playbooks", "vars", "inputs.yml")["continuity_playbook_inputs"]


def _awx_job_template(arguments):
    """awx.awx.job_template's message for ``arguments``, against a controller URL where nothing listens: the module
    checks its arguments against its own spec first, so failing to connect means it accepted them."""
    result, _output = run_module("job_template", dict(arguments, controller_host="http://127.0.0.1:1",
                                                      controller_username="admin", controller_password="unused"),
                                 timeout=120, collection="awx.awx")
    return result["msg"]


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_a_job_template_is_accepted_by_awx_job_template(name):
    template = TEMPLATES[name]
    assert not ADDED_BY_CONFIGURE & set(template), "set by awx/configure.yml for every template"
    message = _awx_job_template(dict(template, organization="o", project="p", inventory="i", credentials=["c"],
                                     execution_environment="e"))
    assert "Connection refused" in message, message
    assert os.path.isfile(os.path.join(AWX, "project", template["playbook"]))


def test_a_template_the_module_would_refuse_is_refused():
    message = _awx_job_template(dict(TEMPLATES["continuity.artemis site"], survey_enabled="maybe"))
    assert "survey_enabled" in message and "Connection refused" not in message


@pytest.mark.parametrize("name", sorted(name for name, template in TEMPLATES.items() if template["survey_enabled"]))
def test_a_survey_asks_only_for_declared_inputs_and_every_required_one(name):
    template = TEMPLATES[name]
    inputs = INPUTS[template["playbook"].removesuffix(".yml")]
    questions = template["survey_spec"]["spec"]
    asked = {question["variable"] for question in questions}
    assert asked <= set(inputs), f"not inputs of {template['playbook']}: {asked - set(inputs)}"
    assert {variable for variable, spec in inputs.items() if spec.get("required")} <= \
        {question["variable"] for question in questions if question["required"]}
    for question in questions:
        assert question["type"] in SURVEY_TYPES and question["question_name"], question
        if question["type"] == "multiplechoice":
            assert question.get("default", question["choices"][0]) in question["choices"], question
        if question["type"] in ("integer", "float") and "default" in question:
            assert question["min"] <= question["default"] <= question["max"], question
        declared = inputs[question["variable"]]["type"]
        survey_gives = {"integer": {"int", "float", "raw"}, "float": {"float", "raw"},
                        "multiplechoice": {"str", "bool", "raw"}, "multiselect": {"list", "raw"}}.get(question["type"], {"str", "raw"})
        assert declared in survey_gives, f"{question['variable']}: survey {question['type']}, input {declared}"


def test_destructive_operations_need_an_explicit_confirmation():
    questions = {q["variable"]: q for q in TEMPLATES["continuity.artemis failover"]["survey_spec"]["spec"]}
    for variable in ("failover_confirm", "failover_force"):
        assert questions[variable]["required"] and questions[variable]["default"] == "false"


def test_the_project_playbooks_run_the_collection_s_by_fqcn(tmp_path):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO_ROOT, "ansible.cfg"))
    names = sorted(template["playbook"].removesuffix(".yml") for template in TEMPLATES.values())
    for name in names:
        assert _load(AWX, "project", f"{name}.yml")[0]["ansible.builtin.import_playbook"] == \
            f"continuity.artemis.{name}"
    playbooks = [os.path.join(AWX, "project", f"{name}.yml") for name in names]
    result = subprocess.run(["ansible-playbook", "--syntax-check", "-i", "inventories/example", *playbooks,
                             os.path.join(AWX, "configure.yml")],
                            cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def test_the_project_installs_exact_releases_the_collection_s_own_and_the_execution_environment_s():
    """A version range would admit an older release (0.1.0 published a CA key in its example inventory)."""
    wanted = {entry["name"]: entry["version"]
              for entry in _load(AWX, "project", "collections", "requirements.yml")["collections"]}
    galaxy = _load(REPO_ROOT, "galaxy.yml")
    environment = {entry["name"]: entry.get("version")
                   for entry in _load(REPO_ROOT, "execution-environment", "requirements.yml")["collections"]}
    assert wanted == {"continuity.artemis": galaxy["version"],
                      **{name: environment[name] for name in galaxy["dependencies"]}}
