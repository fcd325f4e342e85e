"""Secrets kept in Ansible Vault: site.yml runs with the vault password, changes nothing on a converged estate
and never prints a secret, even verbose."""

import shutil
import subprocess

from support.estate import TESTBED_INVENTORY, generated_secrets, run_playbook


def test_site_runs_with_vault_encrypted_secrets_and_logs_none(estate, tmp_path):
    inventory = tmp_path / "inventory"
    shutil.copytree(TESTBED_INVENTORY, inventory)
    secrets = inventory / "group_vars" / "all" / "secrets.yml"
    vault_password = tmp_path / "vault-password"
    vault_password.write_text("correct horse battery staple\n")
    subprocess.run(["ansible-vault", "encrypt", "--vault-password-file", str(vault_password), str(secrets)],
                   check=True, capture_output=True)
    assert secrets.read_text().startswith("$ANSIBLE_VAULT;")

    result = run_playbook("site.yml", inventory=str(inventory),
                          extra_args=["--vault-password-file", str(vault_password), "-v"])

    assert result.rc == 0, result.output[-4000:]
    assert all(counters["changed"] == 0 for counters in result.recap().values()), result.recap()
    assert not [secret for secret in generated_secrets() if secret in result.output], "a password was logged"
