package io.github.txnpreserver.it;

import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.Base64;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * HS256 JSON web tokens for Pulsar's token authentication, made here instead of with
 * {@code bin/pulsar tokens}: a secret key and one token per role.
 */
public final class Tokens {

    private final byte[] secret;

    private Tokens(byte[] secret) {
        this.secret = secret;
    }

    public static Tokens withRandomSecret() {
        byte[] secret = new byte[32];
        new SecureRandom().nextBytes(secret);
        return new Tokens(secret);
    }

    /** The broker.conf value of {@code tokenSecretKey}. */
    public String secretKeyConfig() {
        return "data:;base64," + Base64.getEncoder().encodeToString(secret);
    }

    /** A token whose subject (the role) is {@code role}. */
    public String tokenFor(String role) {
        Base64.Encoder encoder = Base64.getUrlEncoder().withoutPadding();
        String header = encoder.encodeToString("{\"alg\":\"HS256\"}".getBytes(StandardCharsets.UTF_8));
        String payload = encoder.encodeToString(("{\"sub\":\"" + role + "\"}").getBytes(StandardCharsets.UTF_8));
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret, "HmacSHA256"));
            byte[] signature = mac.doFinal((header + "." + payload).getBytes(StandardCharsets.UTF_8));
            return header + "." + payload + "." + encoder.encodeToString(signature);
        } catch (java.security.GeneralSecurityException e) {
            throw new IllegalStateException(e);
        }
    }
}
