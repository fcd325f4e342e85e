# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    # The address groups option of every module that reads the estate's groups (module_utils/artemis_estate.py,
    # estate_argument_spec).
    DOCUMENTATION = r'''
options:
  address_groups:
    description: The estate's address groups, as in C(replication_address_groups).
    type: list
    required: true
    elements: dict
    suboptions:
      name:
        description: The group's name.
        type: str
        required: true
      addresses:
        description: The group's address prefixes; empty for the catch-all group (every address no other group has).
        type: list
        elements: str
        default: []
      mode:
        description: What is replicated, C(full_state) or C(messages_only); only C(full_state) groups are staged, fenced
          and activated.
        type: str
        default: full_state
      owner:
        description: The datacentre that owns the group; else the active datacentre.
        type: str
      engine:
        description: What carries the group across, C(mirror) or C(bridge).
        type: str
        default: mirror
      staging_delay_ms:
        description: A group active at every datacentre, with this staging delay; it is never fenced or activated.
        type: int
'''
