// TLS for a server reached off loopback. The server's identity is a self-signed certificate made
// at its first start beside the token (key and certificate in one PEM file of mode 0600); clients
// pin it by its SHA-256 fingerprint, which the server writes into the token file, so the one file
// a user copies to the client (mode 0600) both proves the client and names the server.
#pragma once

#include <string>

#include "engine/util/result.h"

struct x509_st;  // OpenSSL's X509

namespace ls::remote {

struct TlsIdentity {
    std::string pem;     // the private key, then the certificate
    std::string sha256;  // the certificate's fingerprint: 64 lowercase hex digits of SHA-256 over its DER
};

// <the token file's folder>/serve-tls.pem
std::string default_tls_identity_path(const std::string& token_path);

// The identity at `path`, or, when nothing is there, a new one (a P-256 key, a certificate valid
// ten years) written to a new file of mode 0600. Refuses a file others may read or write, one that
// is not a regular file, and one without a key and a certificate that belong together.
Result<TlsIdentity> load_or_create_tls_identity(const std::string& path, bool* created = nullptr);

// A certificate's fingerprint: SHA-256 over its DER encoding, as 64 lowercase hex digits ("" when
// OpenSSL cannot encode it).
std::string certificate_sha256(x509_st* cert);

// "64 lowercase hex digits": what a fingerprint line in a token file must hold.
bool is_sha256_hex(const std::string& text);

}  // namespace ls::remote
