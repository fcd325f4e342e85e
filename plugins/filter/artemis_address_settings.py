# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter that adds to the configured address-settings what address staging needs (see module_utils)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_address_settings import address_settings


def artemis_address_settings(configured, staging=(), delete_removed_diverts=False):
    try:
        return address_settings(configured, staging, delete_removed_diverts)
    except ValueError as exc:
        raise AnsibleFilterError("artemis_address_settings: %s" % exc)


class FilterModule:
    def filters(self):
        return {"artemis_address_settings": artemis_address_settings}
