# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter that turns role grants and address staging into Artemis security-settings (see module_utils)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_security import security_settings


def artemis_security_settings(roles, admin_role, all_permissions, staging=(), peer_roles=()):
    try:
        return security_settings(roles, admin_role, all_permissions, staging, peer_roles)
    except ValueError as exc:
        raise AnsibleFilterError("artemis_security_settings: %s" % exc)


class FilterModule:
    def filters(self):
        return {"artemis_security_settings": artemis_security_settings}
