# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    # Options of every module that talks to Artemis's management API (module_utils/artemis_management.py).
    DOCUMENTATION = r'''
options:
  brokers:
    description:
      - The brokers to talk to. Their management API (Jolokia) must be reachable from where the module runs.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The broker's name (C(broker_name) of the broker role; the name in its C(broker.xml)).
        type: str
        required: true
      datacentre:
        description: The datacentre the broker belongs to.
        type: str
        required: true
      management_url:
        description:
          - The broker's web server (C(https://host:8161)) or its full Jolokia URL.
        type: str
        required: true
      ha_role:
        description: Its configured part in its datacentre (informational; which broker is live is read from it).
        type: str
        choices: [standalone, primary, backup]
  management_user:
    description: A user with a role in the brokers' C(broker_management_roles).
    type: str
    required: true
  management_password:
    description: Its password.
    type: str
    required: true
  validate_certs:
    description: Verify the management endpoint's TLS certificate (https URLs).
    type: bool
    default: true
  ca_path:
    description:
      - CA certificate file to verify the brokers' HTTPS management endpoints against (the estate's CA,
        C(replication_tls_ca_cert)). Without it the system's trusted CAs are used.
    type: path
  request_timeout:
    description: Seconds to wait for each management request.
    type: int
    default: 10
notes:
  - "Talks to the brokers over HTTP(S) only, so it can run on the controller (C(delegate_to: localhost)) or on any
    host that reaches the management endpoints."
'''

    QUEUE_FILTER = r'''
options:
  include_prefixes:
    description: Only queues whose names start with one of these (every application queue when empty).
    type: list
    elements: str
    default: []
  exclude_prefixes:
    description:
      - Leave out queues whose names start with one of these, for example the C(messages_only) groups, whose copies
        are consumed independently on each site.
    type: list
    elements: str
    default: []
'''

    # The attributes of a module that only reads from the brokers.
    READ_ONLY = r'''
attributes:
  check_mode:
    support: full
    description: Reads only, so it runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to show.
'''
