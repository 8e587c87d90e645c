package aiokproto.testing;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/** Spring Authorization Server with only Spring Boot's auto-configuration: the clients,
 *  their secrets and token lifetimes come from the properties file aiokproto writes. */
@SpringBootApplication
public class OidcServer {
    public static void main(String[] args) {
        SpringApplication.run(OidcServer.class, args);
    }
}
