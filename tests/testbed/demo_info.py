"""Print where the test bed's brokers are and how to send a first message (the end of `make demo`)."""

import json
import os
import subprocess
import sys

TESTBED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testbed")


def main(artemis_home):
    nodes = json.loads(subprocess.run([TESTBED, "status", "--json"], check=True, capture_output=True,
                                      text=True).stdout)
    print("\nBrokers of the test bed:")
    for node in nodes:
        print(f"  {node['name']:<12} {node['dc']:<5} AMQP {node['amqp_url']:<28} Jolokia {node['management_url']}")
    print("  Every client port is TLS: the CORE URLs below carry the estate's CA (trustStorePath).")
    source = next(node for node in nodes if node["dc"] == "dc1")
    target = next(node for node in nodes if node["dc"] != "dc1")
    user, password = source["credentials"]["user"], source["credentials"]["password"]
    admin, admin_password = source["management_credentials"]["user"], source["management_credentials"]["password"]
    cli = os.path.join(artemis_home, "bin", "artemis")
    print(f"""
Send ten persistent messages to queue 'demo' in dc1 (the active datacentre):
  {cli} producer --url '{source['core_url']}' --user {user} --password {password} \\
      --destination queue://demo --message-count 10

See them replicated in {target['dc']} (browsing does not consume):
  {cli} browser --url '{target['core_url']}' --user {user} --password {password} --destination queue://demo

Consume them in dc1, and the acknowledgements replicate too ({target['dc']}'s copy empties):
  {cli} consumer --url '{source['core_url']}' --user {user} --password {password} \\
      --destination queue://demo --message-count 10

Count them as an operator does (a management message: the administrator's):
  {cli} queue stat --url '{target['core_url']}' --user {admin} --password {admin_password} --queueName demo

The passwords are in inventories/testbed/group_vars/all/secrets.yml.
Remove the test bed with: make testbed-down
""")


if __name__ == "__main__":
    main(sys.argv[1])
