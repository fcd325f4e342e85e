# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Artemis address-settings from the configured ones and address staging: where a datacentre is passive for a
group, a mirrored message that finds no queue is kept on KEPT_ADDRESS instead of being dropped.

Why: with journal replication, a mirror can deliver a message before the command that creates its queue (a queue
auto-created at an AMQP attach, docs/upstream/mirror-create-queue-race.md). The mirror target routes without a
session, so nothing auto-creates the queue, and Artemis drops the message. ``send-to-dla-on-no-route`` makes it keep
the message on the dead-letter address instead, with its original address and the source's identity of it.

Only staged prefixes keep: on an active one the setting would also catch local sends that rightly go nowhere (a
multicast address without subscribers) and would move the application's dead letters off its own DLA.

Shared by the broker role (broker.xml, through the artemis_address_settings filter) and artemis_site (which applies
the same settings at runtime when it fences or activates), so that configuration and activation never disagree.
"""

from __future__ import annotations

import json

from ansible_collections.continuity.artemis.plugins.module_utils.artemis_estate import ACK_NOTICE_PREFIX, prefix_entries

# The address (and its one anycast queue) where a passive datacentre keeps what the mirror could not route.
KEPT_ADDRESS = 'continuity.kept'
# The properties of a kept message: its original address, and the source broker's node and message id (the mirror
# puts them on every message it delivers; they survive Artemis's dead-letter copy).
ORIGINAL_ADDRESS_PROPERTY = '_AMQ_ORIG_ADDRESS'
SOURCE_NODE_PROPERTY = 'x-opt-amq-bkr-id'
SOURCE_MESSAGE_ID_PROPERTY = 'x-opt-amq-mr-id'

KEEP_UNROUTED = {'send-to-dla-on-no-route': True, 'dead-letter-address': KEPT_ADDRESS}
# Addresses that route to no queue by design, never kept: Artemis's own (its notifications, when nobody listens) and
# the broker plugin's acknowledgement notices (applied while routed; kept, they would fill the broker's memory).
NEVER_KEPT_MATCHES = ('activemq.management.#', 'activemq.notifications', ACK_NOTICE_PREFIX + '#')

# broker.xml element names whose JSON name (addAddressSettings) is not simply the camel case of it.
_JSON_NAMES = {
    'address-full-policy': 'addressFullMessagePolicy',
    'page-full-policy': 'pageFullMessagePolicy',
    'disk-full-policy': 'diskFullMessagePolicy',
    'redelivery-delay-multiplier': 'redeliveryMultiplier',
    'send-to-dla-on-no-route': 'sendToDLAOnNoRoute',
    'page-max-cache-size': 'pageCacheMaxSize',
}


def prefix_match(prefix):
    """The address-setting match of an address prefix (``""``: every address)."""
    return prefix + '#'


def _effective(configured, prefix, key):
    """The value of ``key`` that the configured settings give addresses under ``prefix``: from the most specific
    configured match ``P#`` with ``prefix`` starting with ``P``, or None."""
    covering = [entry for entry in configured if entry['match'].endswith('#')
                and prefix.startswith(entry['match'][:-1]) and key in entry.get('settings', {})]
    if not covering:
        return None
    return max(covering, key=lambda entry: len(entry['match']))['settings'][key]


def address_settings(configured, staging=(), delete_removed_diverts=False):
    """``[{match, settings}]`` sorted by match: the configured settings, and for each staging entry its prefix's match
    with the configured settings of that match and:

    - staged: KEEP_UNROUTED;
    - on the addresses that route nowhere by design (NEVER_KEPT_MATCHES), when a group has prefixes that a fence may
      stage at runtime: never kept;
    - not staged, under a prefix (a more general match may be staged): the configured ``send-to-dla-on-no-route``
      (else false) and ``dead-letter-address`` spelled out, since Artemis merges settings from the general matches.

    With ``delete_removed_diverts`` (broker.xml) every address says ``config-delete-diverts: FORCE`` unless configured
    otherwise: without it Artemis redeploys a divert removed from broker.xml from its journal.
    """
    for entry in configured:
        if not isinstance(entry, dict) or not isinstance(entry.get('match'), str) \
                or not isinstance(entry.get('settings', {}), dict):
            raise ValueError("each address setting needs 'match' and a 'settings' mapping, got %r" % (entry,))
    by_match = dict((entry['match'], dict(entry.get('settings') or {})) for entry in configured)
    if staging:
        for match in NEVER_KEPT_MATCHES:
            by_match.setdefault(match, {})['send-to-dla-on-no-route'] = False
    if delete_removed_diverts:
        by_match.setdefault('#', {}).setdefault('config-delete-diverts', 'FORCE')
    for entry in staging:
        settings = by_match.setdefault(prefix_match(entry['prefix']), {})
        if entry['staged']:
            settings.update(KEEP_UNROUTED)
        elif entry['prefix']:
            settings['send-to-dla-on-no-route'] = bool(_effective(configured, entry['prefix'],
                                                                  'send-to-dla-on-no-route'))
            dead_letter_address = _effective(configured, entry['prefix'], 'dead-letter-address')
            if dead_letter_address is not None:
                settings['dead-letter-address'] = dead_letter_address
    return [{'match': match, 'settings': by_match[match]} for match in sorted(by_match) if by_match[match]]


def json_name(key):
    """The addAddressSettings JSON name of a broker.xml address-setting element."""
    if key in _JSON_NAMES:
        return _JSON_NAMES[key]
    first, *rest = key.split('-')
    return first + ''.join(word.capitalize() for word in rest)


def as_json(settings):
    """One match's settings as addAddressSettings takes them (broker.xml names and values to JSON)."""
    values = {}
    for key, value in settings.items():
        if isinstance(value, str) and value.lstrip('-').isdigit():
            value = int(value)
        elif isinstance(value, str) and value.lower() in ('true', 'false'):
            value = value.lower() == 'true'
        values[json_name(key)] = value
    return json.dumps(values, sort_keys=True)


def group_address_settings(configured, groups, selected, passive):
    """{match: settings} that artemis_site applies at runtime for the prefixes of the ``selected`` groups, when it
    makes them passive or active (computed as for broker.xml)."""
    staging = prefix_entries(groups, selected if passive else [])
    wanted = set(prefix_match(entry['prefix']) for entry in staging if entry['group'] in selected)
    return dict((entry['match'], entry['settings']) for entry in address_settings(configured, staging)
                if entry['match'] in wanted)


def check_address(match):
    """An address that a prefix match covers (and no more specific match of ours): where to read what it applies."""
    return match[:-1] + KEPT_ADDRESS + '.check'


def differs(applied, settings):
    """Whether the settings Artemis applies to an address (getAddressSettingsAsJSON) differ from ``settings``
    (broker.xml names) in what keeping decides: ``send-to-dla-on-no-route`` and ``dead-letter-address``."""
    if bool(applied.get('sendToDLAOnNoRoute')) != bool(settings.get('send-to-dla-on-no-route')):
        return True
    return 'dead-letter-address' in settings and applied.get('deadLetterAddress') != settings['dead-letter-address']
