# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that turn role grants and address staging into Artemis security-settings, and say why client roles could
reach replication (see module_utils)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_security import (
    directory_role_search, fence_settings, role_errors, security_settings)


def artemis_security_settings(roles, admin_role, all_permissions, staging=(), peer_roles=()):
    try:
        return security_settings(roles, admin_role, all_permissions, staging, peer_roles)
    except ValueError as exc:
        raise AnsibleFilterError("artemis_security_settings: %s" % exc)


def artemis_fence_settings(fence_staging, roles, admin_role, peer_roles=()):
    try:
        return fence_settings(fence_staging, roles, admin_role, peer_roles)
    except ValueError as exc:
        raise AnsibleFilterError("artemis_fence_settings: %s" % exc)


def artemis_role_errors(roles, users=(), management_roles=(), peer_roles=()):
    return role_errors(roles, users, management_roles, peer_roles)


def artemis_directory_role_search(role_search, role_name, withheld_roles):
    return directory_role_search(role_search, role_name, withheld_roles)


class FilterModule:
    def filters(self):
        return {"artemis_security_settings": artemis_security_settings, "artemis_role_errors": artemis_role_errors,
                "artemis_directory_role_search": artemis_directory_role_search,
                "artemis_fence_settings": artemis_fence_settings}
