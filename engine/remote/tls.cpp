#include "engine/remote/tls.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "engine/remote/access.h"

namespace ls::remote {
namespace fs = std::filesystem;
namespace {

struct FreeKey { void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); } };
struct FreeCert { void operator()(X509* x) const { X509_free(x); } };
struct FreeBio { void operator()(BIO* b) const { BIO_free(b); } };
using KeyPtr = std::unique_ptr<EVP_PKEY, FreeKey>;
using CertPtr = std::unique_ptr<X509, FreeCert>;
using BioPtr = std::unique_ptr<BIO, FreeBio>;

Result<TlsIdentity> make_identity() {
    KeyPtr key(EVP_EC_gen("P-256"));
    CertPtr cert(X509_new());
    if (!key || !cert) return make_error(ErrorCode::kInternal, "OpenSSL could not make a key for the TLS certificate");
    unsigned char serial[16];
    if (RAND_bytes(serial, sizeof serial) != 1) return make_error(ErrorCode::kInternal, "OpenSSL could not generate a serial number");
    serial[0] &= 0x7f;  // a positive number
    BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
    const bool ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get())) && X509_set_version(cert.get(), 2) &&
                    X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) &&
                    X509_gmtime_adj(X509_getm_notAfter(cert.get()), 10L * 365 * 24 * 3600) &&
                    X509_set_pubkey(cert.get(), key.get()) &&
                    X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                                               reinterpret_cast<const unsigned char*>("layerscope serve"), -1, -1, 0) &&
                    X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) &&
                    X509_sign(cert.get(), key.get(), EVP_sha256()) > 0;
    BN_free(bn);
    if (!ok) return make_error(ErrorCode::kInternal, "OpenSSL could not make the TLS certificate");
    BioPtr bio(BIO_new(BIO_s_mem()));
    if (!bio || !PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) ||
        !PEM_write_bio_X509(bio.get(), cert.get()))
        return make_error(ErrorCode::kInternal, "OpenSSL could not write the TLS certificate");
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &data);
    return TlsIdentity{std::string(data, static_cast<size_t>(size)), certificate_sha256(cert.get())};
}

// The key and certificate in `pem`, checked to belong together.
Result<TlsIdentity> parse_identity(const std::string& path, std::string pem) {
    BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
    KeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
    BioPtr bio2(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
    CertPtr cert(bio2 ? PEM_read_bio_X509(bio2.get(), nullptr, nullptr, nullptr) : nullptr);
    if (!key) return make_error(ErrorCode::kBadInput, fmt::format("the TLS identity {} holds no private key (PEM)", path));
    if (!cert) return make_error(ErrorCode::kBadInput, fmt::format("the TLS identity {} holds no certificate (PEM)", path));
    if (X509_check_private_key(cert.get(), key.get()) != 1)
        return make_error(ErrorCode::kBadInput, fmt::format("the TLS identity {}: its certificate is not its key's", path));
    return TlsIdentity{std::move(pem), certificate_sha256(cert.get())};
}

}  // namespace

std::string default_tls_identity_path(const std::string& token_path) {
    const fs::path parent = fs::path(token_path).parent_path();
    return (parent.empty() ? fs::path("serve-tls.pem") : parent / "serve-tls.pem").string();
}

std::string certificate_sha256(X509* cert) {
    unsigned char* der = nullptr;
    const int size = i2d_X509(cert, &der);
    if (size <= 0) return {};
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    const bool ok = EVP_Digest(der, static_cast<size_t>(size), md, &n, EVP_sha256(), nullptr) == 1;
    OPENSSL_free(der);
    if (!ok) return {};
    std::string hex;
    for (unsigned int i = 0; i < n; ++i) hex += fmt::format("{:02x}", md[i]);
    return hex;
}

bool is_sha256_hex(const std::string& text) {
    if (text.size() != 64) return false;
    for (char c : text)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

Result<TlsIdentity> load_or_create_tls_identity(const std::string& path, bool* created) {
    if (created) *created = false;
    std::error_code ec;
    if (fs::symlink_status(path, ec).type() != fs::file_type::not_found) {
        auto pem = read_private_file(path, "TLS identity", 64 * 1024);
        if (!pem) return pem.error();
        return parse_identity(path, std::move(pem.value()));
    }
    auto identity = make_identity();
    if (!identity) return identity.error();
    if (Status s = create_private_file(path, identity.value().pem, "TLS identity"); !s) return s.error();
    if (created) *created = true;
    return identity;
}

}  // namespace ls::remote
