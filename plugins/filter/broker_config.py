# -*- coding: utf-8 -*-
# Copyright: continuity.artemis contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that give the broker role the rules of module_utils/artemis_broker_config.py (acceptors, connectors,
queues, diverts, core bridges, broker properties and the stores' directories) and of
module_utils/artemis_broker_settings.py (the settings' own values)."""

from __future__ import annotations

from ansible_collections.continuity.artemis.plugins.module_utils import artemis_broker_config, artemis_broker_settings


def artemis_addresses(builtin_addresses, addresses, queues):
    return artemis_broker_config.address_elements(builtin_addresses, addresses, queues)


def artemis_diverts(diverts):
    return artemis_broker_config.diverts(diverts)


def artemis_bridges(bridges):
    return artemis_broker_config.bridges(bridges)


def artemis_connector_url(connector, tls_dir):
    return artemis_broker_config.connector_url(connector, tls_dir)


def artemis_broker_config_errors(builtin_addresses, addresses, queues, connectors, diverts, bridges, has_ca=True):
    return artemis_broker_config.config_errors(builtin_addresses, addresses, queues, connectors, diverts, bridges,
                                               has_ca)


def artemis_acceptor_changes(broker_xml, acceptors):
    return artemis_broker_config.acceptor_changes(broker_xml, acceptors)


def artemis_client_acceptors(acceptors, tls_parameters, certificate_domain):
    return artemis_broker_config.client_acceptors(acceptors, tls_parameters, certificate_domain)


def artemis_acceptor_errors(acceptors):
    return artemis_broker_config.acceptor_errors(acceptors)


def artemis_store_errors(stores):
    return artemis_broker_config.store_errors(stores)


def artemis_moved_stores(broker_xml, stores):
    return artemis_broker_config.moved_stores(broker_xml, stores)


def artemis_broker_properties(properties):
    return artemis_broker_config.broker_properties_text(properties)


def artemis_broker_property_errors(properties):
    return artemis_broker_config.broker_property_errors(properties)


def artemis_broker_settings_errors(settings, derived):
    return artemis_broker_settings.settings_errors(settings, derived)


def artemis_unapplied_broker_properties(status):
    return artemis_broker_config.unapplied_broker_properties(status)


def artemis_retired_mirrors(broker_xml, wanted, listed_queues):
    return artemis_broker_config.retired_mirrors(broker_xml, wanted, listed_queues)


def artemis_stops_routing_reasons(retired):
    return artemis_broker_config.stops_routing_reasons(retired)


class FilterModule:
    def filters(self):
        return {'artemis_addresses': artemis_addresses, 'artemis_connector_url': artemis_connector_url,
                'artemis_diverts': artemis_diverts, 'artemis_bridges': artemis_bridges,
                'artemis_broker_config_errors': artemis_broker_config_errors,
                'artemis_acceptor_changes': artemis_acceptor_changes,
                'artemis_client_acceptors': artemis_client_acceptors, 'artemis_acceptor_errors': artemis_acceptor_errors,
                'artemis_broker_properties': artemis_broker_properties,
                'artemis_broker_property_errors': artemis_broker_property_errors,
                'artemis_broker_settings_errors': artemis_broker_settings_errors,
                'artemis_unapplied_broker_properties': artemis_unapplied_broker_properties,
                'artemis_store_errors': artemis_store_errors, 'artemis_moved_stores': artemis_moved_stores,
                'artemis_retired_mirrors': artemis_retired_mirrors,
                'artemis_stops_routing_reasons': artemis_stops_routing_reasons}
