"""The public-key digests by which the estate recognises a CA whose key was published, in whatever file it comes; and
the pattern that admits exactly the other datacentres' brokers, checked against Java itself: the subject as Artemis's
certificate login module reads it (X509Certificate.getSubjectDN().getName()), matched by java.util.regex."""

import datetime
import os
import random
import string
import subprocess

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID, ObjectIdentifier

from ansible_collections.continuity.artemis.plugins.filter.certificates import (
    certificate_key_digests, certificate_subject_pattern, java_subject)
from support import tls

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
COMPROMISED = os.path.join(REPO, "tests", "support", "pki", "compromised-ca-0.1.0.pem")


def _compromised_keys():
    with open(os.path.join(REPO, "roles", "replication", "vars", "main.yml")) as handle:
        return yaml.safe_load(handle)["_replication_compromised_ca_keys"]


def test_the_ca_of_version_0_1_0_is_recognised_alone_in_a_bundle_and_with_other_line_endings(tmp_path):
    leaked = open(COMPROMISED).read()
    other, _key = tls.rogue_ca(tmp_path)
    bundle = open(other).read() + leaked
    for text in (leaked, leaked.replace("\n", "\r\n"), bundle, "\n\n" + bundle.replace("\n", "\r\n")):
        assert set(certificate_key_digests(text)) & set(_compromised_keys()), text[:80]
    assert len(certificate_key_digests(bundle)) == 2
    assert not set(certificate_key_digests(open(other).read())) & set(_compromised_keys())


def test_text_without_a_certificate_is_refused():
    with pytest.raises(AnsibleFilterError, match="no PEM certificate"):
        certificate_key_digests("not a certificate")


# What Artemis does with a client certificate's subject and a certificate user's /pattern/.
JAVA = """
import java.io.FileInputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.List;
import java.util.regex.Pattern;

public class Subjects {
   public static void main(String[] args) throws Exception {
      CertificateFactory factory = CertificateFactory.getInstance("X.509");
      List<String> patterns = Files.readAllLines(Path.of(args[0]));
      for (int i = 1; i < args.length; i++) {
         try (FileInputStream in = new FileInputStream(args[i])) {
            String dn = ((X509Certificate) factory.generateCertificate(in)).getSubjectDN().getName();
            StringBuilder matched = new StringBuilder();
            for (String pattern : patterns) {
               matched.append(Pattern.compile(pattern).matcher(dn).matches() ? '1' : '0');
            }
            System.out.println(matched + "\t" + dn);
         }
      }
   }
}
"""
TYPES = [NameOID.COMMON_NAME, NameOID.COUNTRY_NAME, NameOID.LOCALITY_NAME, NameOID.STATE_OR_PROVINCE_NAME,
         NameOID.ORGANIZATION_NAME, NameOID.ORGANIZATIONAL_UNIT_NAME, NameOID.STREET_ADDRESS,
         NameOID.DOMAIN_COMPONENT, NameOID.USER_ID, NameOID.EMAIL_ADDRESS, NameOID.SERIAL_NUMBER, NameOID.TITLE,
         NameOID.GIVEN_NAME, NameOID.SURNAME, NameOID.INITIALS, NameOID.GENERATION_QUALIFIER,
         NameOID.DN_QUALIFIER]


def _certificate(directory, stem, rdns):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.RelativeDistinguishedName(rdn) for rdn in rdns])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
                   .sign(key, hashes.SHA256()))
    path = directory / f"{stem}.pem"
    path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return path


def _value(rng, oid):
    if oid == NameOID.COUNTRY_NAME:
        return rng.choice(["DE", "GB", "US"])
    alphabet = string.ascii_letters + string.digits + " .-_@" + ',=+<>#;\\"'
    if oid in (NameOID.SERIAL_NUMBER, NameOID.DN_QUALIFIER):  # PrintableString
        alphabet = string.ascii_letters + string.digits + " '()+,-./:=?"
    return "".join(rng.choice(alphabet) for _position in range(rng.randint(1, 12)))


def test_the_replication_login_pattern_admits_exactly_each_peer_s_subject_as_java_reads_it(tmp_path):
    rng = random.Random(4404)
    subjects = [[[x509.NameAttribute(NameOID.COMMON_NAME, "dc1-node1")]],
                # A subject that names a peer inside another attribute: the CN-substring pattern of before admitted
                # it.
                [[x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "x,CN=dc1-node1,y")],
                 [x509.NameAttribute(NameOID.COMMON_NAME, "evil")]],
                [[x509.NameAttribute(NameOID.COMMON_NAME, "dc1-node1")],
                 [x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "extra")]]]
    for _subject in range(60):
        rdns = []
        for _rdn in range(rng.randint(1, 5)):
            types = rng.sample(TYPES, rng.choice([1, 1, 1, 2]))
            rdns.append([x509.NameAttribute(oid, _value(rng, oid)) for oid in types])
        subjects.append(rdns)
    paths = [_certificate(tmp_path, f"c{index}", rdns) for index, rdns in enumerate(subjects)]
    patterns = [certificate_subject_pattern([path.read_text()]) for path in paths]
    (tmp_path / "patterns.txt").write_text("\n".join(patterns) + "\n")
    (tmp_path / "Subjects.java").write_text(JAVA)
    subprocess.run(["javac", "-nowarn", "-d", str(tmp_path), str(tmp_path / "Subjects.java")], check=True,
                   capture_output=True, text=True)
    lines = subprocess.run(["java", "-cp", str(tmp_path), "Subjects", str(tmp_path / "patterns.txt"),
                            *map(str, paths)], check=True, capture_output=True, text=True).stdout.splitlines()
    assert len(lines) == len(paths)
    for index, (line, path) in enumerate(zip(lines, paths)):
        matched, dn = line.split("\t", 1)
        assert java_subject(x509.load_pem_x509_certificate(path.read_bytes())) == dn
        # Each pattern admits its own certificate's subject and no other (subjects differ but for chance).
        admitted = [other for other, flag in enumerate(matched) if flag == "1"]
        assert index in admitted, (dn, patterns[index])
        assert all(lines[other].split("\t", 1)[1] == dn for other in admitted)
    assert lines[1].split("\t", 1)[0][0] == "0", "the peer's pattern admitted a subject naming it in another attribute"


def test_a_subject_whose_java_form_is_unknown_is_refused_by_name(tmp_path):
    path = _certificate(tmp_path, "odd", [
        [x509.NameAttribute(ObjectIdentifier("1.3.6.1.4.1.99999.1"), "x")],
        [x509.NameAttribute(NameOID.COMMON_NAME, "dc1-node1")]])
    with pytest.raises(AnsibleFilterError, match="CN=dc1-node1.*1.3.6.1.4.1.99999.1"):
        certificate_subject_pattern([path.read_text()])
