#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
module: artemis_site
short_description: Activate or fence a datacentre's Artemis brokers
version_added: 0.1.0
description:
  - "C(state=passive) fences the datacentre's clients for the selected address groups: application roles may
    neither send nor consume there (mirrors keep delivering, so the replicated copies stay staged), and the client
    connections still open on its brokers are closed when the fence changed the broker's roles, or a client still
    consumes from a queue of those groups. A fence that already holds leaves the clients alone: none of them may
    act on the fenced groups, and the datacentre's other groups (active there) keep their clients."
  - "C(state=active) opens them again, so the datacentre's clients produce and consume. Replication needs no change:
    every datacentre mirrors to every other one, and events start only where clients may act."
  - The state is applied through the management API as runtime security settings, which Artemis keeps in its
    journal (they survive restarts and override the same match in C(broker.xml)). The settings are computed exactly
    as the broker role computes C(broker.xml)'s, from the same variables.
  - "With O(address_settings), a passive datacentre also keeps what the mirrors deliver and cannot route (a queue
    whose creation is still on its way) on C(continuity.kept), and an active one stops keeping: the same
    address settings as the broker role writes to C(broker.xml) for the datacentre's staging."
  - "C(state=active) also sends each live broker that answers, in every datacentre, a record of the activation per
    group; a broker that starts compares the other datacentres' records with its own (the broker plugin's
    activation check) and fences a group whose newest record names another datacentre."
  - "Fenced: refuses to activate while another reachable datacentre is active for one of the groups, unless
    O(force=true). Every broker of the datacentre must be reachable, and one of them live (not an HA pair between
    its brokers); nothing changes otherwise."
extends_documentation_fragment:
  - continuity.artemis.management
  - continuity.artemis.estate
options:
  datacentre:
    description: The datacentre to activate or fence. O(brokers) also lists the others, for the fencing check.
    type: str
    required: true
  state:
    description: C(active) or C(passive).
    type: str
    choices: [active, passive]
    required: true
  groups:
    description: Names of the groups to activate or fence. Default every C(full_state) group.
    type: list
    elements: str
  roles:
    description: The application roles, as in C(broker_roles) (C(name), C(match), C(permissions)).
    type: list
    elements: dict
    required: true
  address_settings:
    description:
      - The estate's address settings, as in C(broker_address_settings) (C(match), C(settings)). Given, the
        datacentre keeps unroutable mirrored messages while passive (see the description); omitted, address
        settings are left alone.
    type: list
    elements: dict
  admin_role:
    description: The administrator role (C(broker_admin_role)); it keeps every permission.
    type: str
    default: amq
  exempt_users:
    description: Users whose connections a fence never closes (the replication and cluster users).
    type: list
    elements: str
    default: []
  exempt_ports:
    description:
      - Ports whose connections a fence never closes (the mutual-TLS acceptor of incoming mirrors, which only the
        other datacentres' brokers can reach; their connections carry the certificate's subject as user).
    type: list
    elements: int
    default: []
  delivery_timeout:
    description:
      - "A fence pauses the groups' queues and waits up to this many seconds for the deliveries already in flight
        to be acknowledged before it closes the client connections, so that no message is delivered twice (once
        here, once at the next active site). Then it resumes the queues (the security settings keep clients off)."
    type: int
    default: 30
  force:
    description: Activate even though another reachable datacentre is active. The result says which.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reports what would change (settings, connections to close) and changes nothing.
  diff_mode:
    support: full
    description: Shows each replaced security setting before and after.
author:
  - continuity.artemis developers (@continuity-artemis)
'''

EXAMPLES = r'''
- name: Fence london (controlled swapover, step 1)
  continuity.artemis.artemis_site:
    brokers: "{{ continuity_brokers }}"
    management_user: admin
    management_password: "{{ vault_broker_admin_password }}"
    datacentre: london
    state: passive
    address_groups: "{{ replication_address_groups }}"
    roles: "{{ broker_roles }}"
    exempt_users: [replicator, cluster]
  delegate_to: localhost
  run_once: true

- name: Activate frankfurt
  continuity.artemis.artemis_site:
    brokers: "{{ continuity_brokers }}"
    management_user: admin
    management_password: "{{ vault_broker_admin_password }}"
    datacentre: frankfurt
    state: active
    address_groups: "{{ replication_address_groups }}"
    roles: "{{ broker_roles }}"
  delegate_to: localhost
  run_once: true
'''

RETURN = r'''
previous_state:
  description: What the datacentre was before, C(active), C(passive) or C(mixed) (some groups or brokers each way).
  returned: always, also when it refuses because another datacentre is active
  type: str
changed_settings:
  description: Per broker, the matches whose security setting was (or in check mode would be) replaced.
  returned: always
  type: dict
changed_address_settings:
  description: Per broker, the address-setting matches replaced (or that would be), to keep or stop keeping.
  returned: always
  type: dict
closed_connections:
  description: Client connections closed (or that would be) by a fence, per broker.
  returned: always
  type: dict
active_elsewhere:
  description: Other datacentres that were reachable and active for one of the groups (only with O(force)).
  returned: always
  type: list
  elements: str
recorded_at:
  description:
    - "C(state=active): the live brokers, of every datacentre that answered, that now keep this activation's record
      per group (on C(continuity.activation)). A broker that starts reads the other datacentres' records and fences
      a group whose newest record names another datacentre, so a datacentre lost in a failover comes back fenced."
  returned: always
  type: list
  elements: str
'''

import time
from collections import namedtuple

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_address_settings import (
    as_json, check_address, differs, group_address_settings)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import (
    ACTIVATION_ADDRESS, ACTIVATION_AT_PROPERTY, ACTIVATION_DATACENTRE_PROPERTY, ACTIVATION_GROUP_PROPERTY,
    REPLICATION_ROLE, estate_argument_spec, full_state_groups, peer_roles, prefix_entries)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_management import (
    ArtemisManagement, BrokerUnreachable, MBeanNotFound, ManagementError, ask_each, management_argument_spec,
    require_at_least)
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_replication import is_application_queue
from ansible_collections.continuity.artemis.plugins.module_utils.artemis_security import (
    PERMISSIONS, STAGED_PERMISSIONS, group_settings, staging_entry)


def desired_settings(params, selected):
    """{match: {permission: [roles]}} for the client matches of the selected groups, in the requested state: what
    broker.xml says in that state, the other datacentres' brokers keeping their grants there (the bridge engine's
    peers deliver to a group's own addresses)."""
    staging = prefix_entries(params['address_groups'], selected if params['state'] == 'passive' else [])
    return group_settings(params['roles'], params['admin_role'], staging,
                          peer_roles(params['address_groups'], params['datacentre']), selected)


def group_queues(client, params, selected):
    """The application queues whose addresses belong to the selected groups."""
    staging = prefix_entries(params['address_groups'], selected)
    return [queue for queue in client.queues() if is_application_queue(queue)
            and (staging_entry(queue['address'], staging) or {}).get('group') in selected]


def queues_in_use(queues):
    """The queues a consumer takes from, or that still deliver: only they may have deliveries in flight. The fence
    pauses them alone (an estate's idle queues cost one management request each otherwise, twice: 112 s with 5,000
    queues in B10)."""
    return [queue for queue in queues if int(queue['consumerCount']) or int(queue['deliveringCount'])]


def let_deliveries_finish(client, queues, timeout):
    """Pause the queues and wait until nothing is being delivered from them; returns what is still in flight."""
    for queue in queues:
        client.pause_queue(queue)
    names = set(queue['name'] for queue in queues)
    deadline = time.monotonic() + timeout
    while True:
        delivering = dict((queue['name'], int(queue['deliveringCount'])) for queue in client.queues()
                          if queue['name'] in names and int(queue['deliveringCount']))
        if not delivering or time.monotonic() >= deadline:
            return delivering
        time.sleep(0.2)


def is_exempt(connection, exempt_users, exempt_ports):
    """Whether a fence leaves the connection open: every user of it is exempt (no user at all: the broker's own,
    such as its HA pair's), or it came in on an exempt port (listConnections' localAddress, host:port)."""
    users = set(user for user in (connection.get('users') or '').split(',') if user)
    port = (connection.get('localAddress') or '').rpartition(':')[2]
    return users <= set(exempt_users) or (port.isdigit() and int(port) in exempt_ports)


def connections_to_close(client, params, selected):
    """The client connections a fence closes: every one not exempt, but those whose every consumer and producer
    works on addresses outside the selected groups (another group's clients, a messages_only group's, go on
    undisturbed: closing them would redeliver what they had in flight). A connection with no consumer or producer,
    or with an anonymous producer, is closed: what it will do is not known."""
    staging = prefix_entries(params['address_groups'], selected)
    elsewhere, here = set(), set()
    for entry in client.consumers() + client.producers():
        address = entry.get('address') or ''
        in_group = not address or (staging_entry(address, staging) or {}).get('group') in selected
        (here if in_group else elsewhere).add(entry.get('remoteAddress'))
    kept = elsewhere - here
    return [connection['connectionID'] for connection in client.connections()
            if not is_exempt(connection, params['exempt_users'], params['exempt_ports'])
            and connection.get('remoteAddress') not in kept]


def live_settings(client, matches):
    """{match: {permission: [roles]}} as the broker applies them now."""
    live = {}
    for match in matches:
        roles = client.roles(match)
        live[match] = dict((permission, sorted(role['name'] for role in roles if role.get(permission)))
                           for permission in PERMISSIONS)
    return live


def clients_may_act(settings, admin_role):
    """The matches on which a client may send or consume: a role other than the administrator and the other
    datacentres' brokers."""
    not_clients = set([admin_role, REPLICATION_ROLE])
    return sorted(match for match, permissions in settings.items()
                  if any(set(permissions.get(permission, [])) - not_clients for permission in STAGED_PERMISSIONS))


BrokerPlan = namedtuple('BrokerPlan', 'broker client live changes connections address_setting_changes')


def address_setting_changes(client, desired_address_settings):
    """The matches whose keeping differs on the broker from what is desired."""
    return sorted(match for match, settings in desired_address_settings.items()
                  if differs(client.address_settings(check_address(match)), settings))


def look(params, client_for=ArtemisManagement.from_params):
    """Every broker asked at once whether it is live: [(broker, its client, its status or the ManagementError it
    raised)]."""
    clients = [client_for(broker, params) for broker in params['brokers']]
    return list(zip(params['brokers'], clients, ask_each(clients, lambda client: client.status())))


def survey(params, desired, selected, looked, desired_address_settings=None):
    """Look at every broker before changing anything (``looked``: what :func:`look` saw): (the plan for each live
    broker of this datacentre, where else clients may act). Raises ManagementError when a broker of this datacentre
    does not answer, or none answers as live (a pair between its brokers: nothing could be changed, and nothing would
    say so)."""
    active_elsewhere, plan = [], []
    for broker, client, status in looked:
        mine = broker['datacentre'] == params['datacentre']
        if isinstance(status, BrokerUnreachable) and not mine:
            continue  # another site that does not answer cannot be active as far as we can tell
        if isinstance(status, ManagementError):
            raise status
        if not status['live']:
            continue  # a waiting backup takes the live broker's journal, settings included
        live = live_settings(client, sorted(desired))
        if not mine:
            acting = clients_may_act(live, params['admin_role'])
            if params['state'] == 'active' and acting:
                active_elsewhere.append('%s (broker %s: %s)' % (broker['datacentre'], broker['name'],
                                                                ', '.join(acting)))
            continue
        changes = sorted(match for match in desired if live[match] != desired[match])
        connections = []
        if params['state'] == 'passive' and (changes or any(int(queue['consumerCount'])
                                                            for queue in group_queues(client, params, selected))):
            connections = connections_to_close(client, params, selected)
        plan.append(BrokerPlan(broker, client, live, changes, connections,
                               address_setting_changes(client, desired_address_settings or {})))
    if not plan:
        raise ManagementError('no broker of %s answers as live (%s): a pair between its brokers, try again once one '
                              'of them has taken over' % (params['datacentre'], ', '.join(
                                  broker['name'] for broker in params['brokers']
                                  if broker['datacentre'] == params['datacentre'])))
    return plan, active_elsewhere


def previous_state(plan, desired, admin_role):
    """active, passive or mixed: what this datacentre's brokers allowed clients before the change."""
    states = set()
    for entry in plan:
        acting = clients_may_act(entry.live, admin_role)
        states.add('active' if len(acting) == len(desired) else 'passive' if not acting else 'mixed')
    return states.pop() if len(states) == 1 else 'mixed'


def apply(module, plan, desired, selected, outcome, desired_address_settings=None):
    """Set the roles, and for a fence let deliveries finish and close the clients' connections. ``outcome`` records
    as it goes the changed settings and closed connections per broker and the diff (check mode: what would change),
    so that a failure half way says what was done."""
    params = module.params
    for entry in plan:
        name = entry.broker['name']
        if entry.changes:
            outcome['changed_settings'][name] = entry.changes
            outcome['diff']['before'][name] = dict((match, entry.live[match]) for match in entry.changes)
            outcome['diff']['after'][name] = dict((match, desired[match]) for match in entry.changes)
        if entry.address_setting_changes:
            outcome['changed_address_settings'][name] = entry.address_setting_changes
        if entry.connections:
            outcome['closed_connections'][name] = len(entry.connections)
        if module.check_mode:
            continue
        for match in entry.address_setting_changes:
            entry.client.set_address_settings(match, as_json(desired_address_settings[match]))
        for match in entry.changes:
            entry.client.set_roles(match, desired[match], PERMISSIONS)
        if entry.connections:
            queues = queues_in_use(group_queues(entry.client, params, selected))
            in_flight = let_deliveries_finish(entry.client, queues, params['delivery_timeout'])
            if in_flight:
                module.warn('%s: deliveries still unacknowledged after %ss, they will be redelivered: %s'
                            % (name, params['delivery_timeout'], in_flight))
            for connection in entry.connections:
                entry.client.close_connection(connection)
            for queue in queues:
                entry.client.resume_queue(queue)


def argument_spec():
    spec = management_argument_spec()
    spec.update(
        datacentre=dict(type='str', required=True),
        state=dict(type='str', required=True, choices=['active', 'passive']),
        groups=dict(type='list', elements='str'),
        roles=dict(type='list', elements='dict', required=True),
        address_settings=dict(type='list', elements='dict'),
        admin_role=dict(type='str', default='amq'),
        exempt_users=dict(type='list', elements='str', default=[]),
        exempt_ports=dict(type='list', elements='int', default=[]),
        force=dict(type='bool', default=False),
        delivery_timeout=dict(type='int', default=30),
    )
    spec.update(estate_argument_spec())
    return spec


def checked_inputs(module):
    """(the selected groups, the desired security settings, the desired address settings or None), or fail naming
    the bad option."""
    params = module.params
    full_state = full_state_groups(params['address_groups'])
    selected = params['groups'] if params['groups'] is not None else full_state
    unknown = sorted(set(selected) - set(full_state))
    if unknown:
        module.fail_json(msg='groups %s are not full_state groups of address_groups that one datacentre owns (those '
                         'are: %s; a group with a staging_delay_ms is active everywhere, never fenced)'
                         % (', '.join(unknown), ', '.join(full_state) or 'none'))
    if not any(broker['datacentre'] == params['datacentre'] for broker in params['brokers']):
        module.fail_json(msg='datacentre %r has no broker in brokers (datacentres: %s)' % (
            params['datacentre'], ', '.join(sorted(set(b['datacentre'] for b in params['brokers'])))))
    try:
        desired = desired_settings(params, selected)
    except ValueError as exc:
        module.fail_json(msg='address_groups: %s' % exc)
    if params['address_settings'] is None:
        return selected, desired, None
    try:
        return selected, desired, group_address_settings(params['address_settings'], params['address_groups'],
                                                         selected, params['state'] == 'passive')
    except ValueError as exc:
        module.fail_json(msg='address_settings: %s' % exc)


def record_activation(params, selected, looked, now=time.time):
    """Send every live broker that answered (``looked``: what :func:`look` saw), in every datacentre, an activation
    record per selected group: this datacentre, now. Returns (the brokers recorded at, {broker: why not} for those
    that answered but could not keep it). A broker that does not answer is left out, without waiting for it again: it
    is the one whose activation check reads the others'."""
    properties = {ACTIVATION_DATACENTRE_PROPERTY: params['datacentre'],
                  ACTIVATION_AT_PROPERTY: str(int(now() * 1000))}
    recorded, missed = [], {}
    for broker, client, status in looked:
        if isinstance(status, ManagementError) or not status['live']:
            continue
        try:
            for group in selected:
                client.send_message(ACTIVATION_ADDRESS, dict(properties, **{ACTIVATION_GROUP_PROPERTY: group}))
            recorded.append(broker['name'])
        except BrokerUnreachable:
            continue
        except MBeanNotFound:
            missed[broker['name']] = 'no address %s (site.yml has not run there with this version)' % ACTIVATION_ADDRESS
        except ManagementError as exc:
            missed[broker['name']] = str(exc)
    return recorded, missed


def run_module(module, client_for=ArtemisManagement.from_params):
    params = module.params
    selected, desired, desired_address_settings = checked_inputs(module)
    looked = look(params, client_for)
    try:
        plan, active_elsewhere = survey(params, desired, selected, looked, desired_address_settings)
    except ManagementError as exc:
        module.fail_json(msg=str(exc))
    previous = previous_state(plan, desired, params['admin_role'])
    if active_elsewhere and not params['force']:
        module.fail_json(msg='refusing to activate %s: already active at %s (clients may send or consume there); '
                             'fence it first (state=passive) or set force=true'
                             % (params['datacentre'], '; '.join(active_elsewhere)),
                         active_elsewhere=active_elsewhere, previous_state=previous)
    outcome = {'changed_settings': {}, 'changed_address_settings': {}, 'closed_connections': {},
               'diff': {'before': {}, 'after': {}}}
    outcome['recorded_at'], unrecorded = [], {}
    if params['state'] == 'active' and not module.check_mode:
        # The record before the settings: a broker's journal (and its backup's copy) then never holds this
        # activation's settings without its record, so a backup that takes over right after does not fence the
        # groups again on an older activation elsewhere (the 2 x 2 chaos run, seed 3).
        outcome['recorded_at'], unrecorded = record_activation(params, selected, looked)
        for broker, reason in sorted(unrecorded.items()):
            module.warn('%s keeps no record of this activation, so a datacentre that returns after a failover may '
                        'not learn of it from there: %s' % (broker, reason))
    try:
        apply(module, plan, desired, selected, outcome, desired_address_settings)
    except ManagementError as exc:
        module.fail_json(msg='%s (the datacentre may now be partly %s: run again)' % (exc, params['state']),
                         changed_settings=outcome['changed_settings'])
    module.exit_json(changed=bool(outcome['changed_settings'] or outcome['changed_address_settings']
                                  or outcome['closed_connections']),
                     previous_state=previous, active_elsewhere=active_elsewhere, **outcome)


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    require_at_least(module, request_timeout=1, delivery_timeout=0)
    run_module(module)


if __name__ == '__main__':
    main()
