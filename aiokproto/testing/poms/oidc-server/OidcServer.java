package aiokproto.testing;

import com.nimbusds.jose.jwk.JWK;
import com.nimbusds.jose.jwk.JWKSet;
import com.nimbusds.jose.jwk.source.ImmutableJWKSet;
import com.nimbusds.jose.jwk.source.JWKSource;
import com.nimbusds.jose.proc.SecurityContext;
import java.nio.file.Files;
import java.nio.file.Path;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;

/** Spring Authorization Server with Spring Boot's auto-configuration: the clients, their
 *  secrets and token lifetimes come from the properties file aiokproto writes, and the
 *  signing key from a JWK file it writes too (so the broker can trust the key set before
 *  this server is up). */
@SpringBootApplication
public class OidcServer {
    public static void main(String[] args) {
        SpringApplication.run(OidcServer.class, args);
    }

    @Bean
    JWKSource<SecurityContext> jwkSource(@Value("${aiokproto.jwk-file}") String path)
            throws Exception {
        return new ImmutableJWKSet<>(new JWKSet(JWK.parse(Files.readString(Path.of(path)))));
    }
}
